// Package sources turns the configuration's source tables into backends
// with their effective policies, for the CLI and the daemon alike. Build
// does no I/O: a root that does not exist yet is found out by its backend
// at each pass.
package sources
