// Package dirwalk walks a directory tree in parallel with the safety rules
// every reclaimer file operation shares: the tree is resolved beneath a
// trusted base descriptor, no symbolic link is followed, no mount point is
// entered (it is reported and left alone), and no path leaves the base.
//
// The walk is descriptor-relative: each directory is opened relative to its
// parent's descriptor, so paths never grow past PATH_MAX and a directory
// renamed elsewhere during the walk cannot redirect it. Directories are
// visited by a bounded pool of workers (LIFO, so the walk stays close to
// depth-first and keeps few directories open); large directories are split
// into chunks that several workers handle at once. Every directory gets a
// post-order LeaveDir callback once all its entries and subdirectories are
// done, which is where a deleter removes it.
//
// Descriptors are bounded: open directories form an LRU cache of at most
// Options.MaxOpenDirs entries. A directory whose descriptor was evicted is
// reopened by name from its nearest open ancestor and checked to be the same
// inode, so a depth of tens of thousands neither exhausts descriptors nor
// the stack (nothing recurses).
//
// A Visitor's methods are called concurrently from several workers and must
// be safe for that. Walk returns only context cancellation or a failure to
// open the starting point; everything else is reported to the Visitor.
package dirwalk
