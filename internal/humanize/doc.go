// Package humanize writes quantities for people: the one formatting of a
// size that the CLI's tables, the dashboard and archive messages share, so
// that the same runtime reads the same everywhere.
package humanize
