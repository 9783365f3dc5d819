// Package cli is reclaimer's command line: it parses flags, loads the
// configuration, builds the engine and prints results. Every command prints
// either a table for people or, with --json, the same values as JSON (one
// printer: the JSON is the table's data), and maps errors to exit codes:
// 0 done, 1 something failed, 2 bad usage or configuration.
//
// Scripts depend on the command names, flags and JSON field names; they
// change only with a major version.
package cli
