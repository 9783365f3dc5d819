package config

import (
	"path/filepath"

	"github.com/reclaimer/reclaimer/internal/rootcheck"
)

// ResolvePaths resolves every configured path once, symbolic links
// included (rootcheck.Resolve), puts the resolved path in its place, and
// validates again on what the kernel will really reach. It refuses a
// managed root that resolves to "/" or a system folder
// (rootcheck.Check), and, through Validate, roots that overlap once
// resolved and a root holding the state folder or the archives: a root that
// is a link to "/" or to the folder holding another root is caught here,
// not at the first pass. Load calls it; call it after adding sources in
// code (AddSource, sources.AdHoc). After it, everything acts only below the
// resolved paths, with the link-refusing walker (internal/beneath).
//
// Which paths: the ledger, the archives, and each source table's Paths by
// role: a repository (PathRepo) and a folder only read (PathRead) are
// resolved but not held to the root rules (they are never deleted from);
// the roots (PathTree,
// PathDirs) are resolved and checked; files are left as written.
func (c *Config) ResolvePaths() error {
	if err := c.Validate(); err != nil {
		return err // the paths as written are wrong already
	}
	v := &validator{c: c}
	resolve := func(key string, p *string) string {
		if *p == "" {
			return ""
		}
		r, err := rootcheck.Resolve(*p)
		if err != nil {
			v.add(key, "%v", err)
			return ""
		}
		*p = r
		return r
	}
	resolve("ledger.path", &c.Ledger.Path)
	resolve("archive.dir", &c.Archive.Dir)
	for _, src := range c.Sources {
		for _, p := range src.Table.Paths() {
			key := src.Key() + "." + p.Key
			switch p.Role {
			case PathRepo, PathRead:
				resolve(key, p.Value)
			case PathTree, PathDirs:
				if r := resolve(key, p.Value); r != "" {
					if err := rootcheck.Check(r); err != nil {
						v.add(key, "resolves to %v", err)
					}
				}
			}
		}
	}
	if len(v.errs) > 0 {
		return joinErrors(v.errs)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	return c.stateOutsideRoots()
}

// stateOutsideRoots refuses a managed root that holds the state folder (the
// ledger's folder, with its cache and API token); Validate already refuses
// one holding the ledger file or the archives. A repository is not a root
// (its worktrees' folder is).
func (c *Config) stateOutsideRoots() error {
	v := &validator{c: c}
	state := filepath.Dir(c.Ledger.Path)
	for _, src := range c.Sources {
		for _, p := range src.Table.Paths() {
			if (p.Role == PathTree || p.Role == PathDirs) && *p.Value != "" && rootcheck.Within(state, *p.Value) {
				v.add(src.Key()+"."+p.Key, "%s holds the state folder %s", *p.Value, state)
			}
		}
	}
	return joinErrors(v.errs)
}
