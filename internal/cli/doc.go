// Package cli is reclaimer's command line, an edge over the application
// layer: it parses flags (anywhere on the line), builds an ops.Service
// (a local *ops.App over the ledger and the sources, or the --server
// client over the HTTP API), calls one operation and prints its view: a
// table for people or, with --json, the view itself (the API's schema).
// Problems go to standard error and into every --json. Exit codes come
// from the error's category (ops.Classify): 0 done, 1 something failed, a
// runtime was not found or a source could not be looked at, 2 bad usage or
// configuration.
//
// Scripts depend on the command names, flags and JSON field names; they
// change only with a major version.
package cli
