// Package testtree builds and fingerprints directory trees for tests and
// benchmarks: a Go port of ../shared/bench/mktree (lay out a recorded
// node_modules shape), small synthetic trees, and a fingerprint of a tree
// (every entry's type, mode, size, link target and content hash, never
// following links) so a test can assert that something survived byte for
// byte.
//
// It is used only from tests; functions take a testing.TB and fail it on
// error.
package testtree
