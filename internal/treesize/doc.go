// Package treesize measures a directory tree with the walker rules of
// package dirwalk: symbolic links are counted as links and never followed,
// mount points are skipped and reported, nothing outside the base is read,
// and a hard-linked inode is counted once.
//
// It reports allocated bytes (what deleting the tree would free), apparent
// bytes (the sum of file sizes) and the number of entries. The walk is
// parallel; Measure is safe to call concurrently and reads nothing but
// directory entries and inode status.
package treesize
