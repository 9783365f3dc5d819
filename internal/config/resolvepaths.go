package config

import (
	"fmt"
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
// code (AddDirRoot, ...). After it, everything acts only below the resolved
// paths, with the link-refusing walker (internal/beneath).
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
	managed := func(key string, p *string) {
		if r := resolve(key, p); r != "" {
			if err := rootcheck.Check(r); err != nil {
				v.add(key, "resolves to %v", err)
			}
		}
	}
	resolve("ledger.path", &c.Ledger.Path)
	resolve("archive.dir", &c.Archive.Dir)
	for i := range c.Worktrees {
		w := &c.Worktrees[i]
		// A repository is never deleted from, only its worktrees: it is
		// resolved, and Validate refuses "/" for it.
		resolve(fmt.Sprintf("worktrees[%d].repo", i), &w.Repo)
		managed(fmt.Sprintf("worktrees[%d].root", i), &w.Root)
	}
	for i := range c.Dirs {
		managed(fmt.Sprintf("dirs[%d].root", i), &c.Dirs[i].Root)
	}
	for i := range c.Docker {
		for j := range c.Docker[i].Roots {
			managed(fmt.Sprintf("docker[%d].roots[%d]", i, j), &c.Docker[i].Roots[j])
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
// one holding the ledger file or the archives.
func (c *Config) stateOutsideRoots() error {
	v := &validator{c: c}
	state := filepath.Dir(c.Ledger.Path)
	for _, s := range c.sources() {
		for _, r := range rootsOf(s) {
			if rootcheck.Within(state, r.path) {
				v.add(s.key+r.suffix, "%s holds the state folder %s", r.path, state)
			}
		}
	}
	return joinErrors(v.errs)
}

type rootOf struct{ suffix, path string }

// rootsOf lists the folders a source deletes from. A repository is not one
// (its worktrees' folder is), so only roots count.
func rootsOf(s keyedSource) []rootOf {
	switch src := s.src.(type) {
	case *WorktreeSource:
		if src.Root != "" {
			return []rootOf{{".root", src.Root}}
		}
	case *DirSource:
		return []rootOf{{".root", src.Root}}
	case *DockerSource:
		var out []rootOf
		for j, r := range src.Roots {
			out = append(out, rootOf{fmt.Sprintf(".roots[%d]", j), r})
		}
		return out
	}
	return nil
}
