// Package schema reads the numbered migrations every ledger store embeds:
// files NNNN_name.sql, applied in version order, each once. The stores
// apply them (package sqlite and package postgres, each in one
// transaction of its own database); this package only reads and checks
// the files, so both stores follow one rule for names and order.
package schema

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered file.
type Migration struct {
	Version int
	Name    string // the file name without .sql, e.g. "0001_init"
	SQL     string
}

// Load reads NNNN_name.sql files from fsys, in version order. A name
// without a positive number, or two files of one version, is an error.
func Load(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: version, Name: strings.TrimSuffix(path.Base(name), ".sql"), SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s: same version", ms[i-1].Name, ms[i].Name)
		}
	}
	return ms, nil
}

// Latest is the highest version of ms, 0 for none.
func Latest(ms []Migration) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// MustSub is fs.Sub for a folder embedded at build time.
func MustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the folder is embedded at build time
	}
	return sub
}
