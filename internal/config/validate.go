package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Validate checks the whole configuration and returns every problem found,
// each an *Error naming its key ("worktrees[1].retention") and, for a parsed
// Config, its line. It does not touch the filesystem: whether a root exists
// is for its backend to find out at each pass (a folder may be mounted
// later). Parse and Load call it; call it again after changing a Config in
// code (for example after AddSource).
//
// Checks of the fixed tables and of what every source shares:
//   - ledger.path and archive.dir are absolute and not inside a managed root;
//   - each source's host paths are absolute, and managed ones not "/";
//   - no managed root is, contains or lies inside another, and no
//     repository lies inside a root whose every child is a runtime, or
//     repeats;
//   - each source's name is valid, and no two sources have one name (two
//     tables with the same identity must be told apart with name);
//   - cache_dirs are relative, clean, without "..";
//   - fractions lie in (0, 1), disk_low is below disk_high (in [policy] and
//     in the effective policy of every source that sets either), and
//     disk_low is not set without disk_high;
//   - durations are not negative;
//   - [server] and [[notify]] (server.go).
//
// Each kind of source checks its own keys (Table.Check).
//
// The overlap checks compare paths as written; ResolvePaths (which Load
// calls) resolves symbolic links and runs them again on the resolved paths.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.absPath("ledger.path", c.Ledger.Path, "ledger file")
	v.absPath("archive.dir", c.Archive.Dir, "archive folder")
	if s3 := c.Archive.S3; s3 != nil {
		if s3.Endpoint == "" {
			v.add("archive.s3.endpoint", "required: the S3 server, e.g. \"https://s3.example.com\"")
		} else if strings.Contains(s3.Endpoint, "://") && !strings.HasPrefix(s3.Endpoint, "http://") && !strings.HasPrefix(s3.Endpoint, "https://") {
			v.add("archive.s3.endpoint", "%q: want http://, https:// or host:port", s3.Endpoint)
		} else if strings.Contains(s3.Endpoint, "@") {
			// Credentials come from the environment or credentials_file.
			v.add("archive.s3.endpoint", "%q: must not hold a user or password", s3.Endpoint)
		}
		if s3.Bucket == "" {
			v.add("archive.s3.bucket", "required: the bucket archives go to")
		}
		if s3.StallTimeout != nil && *s3.StallTimeout <= 0 {
			v.add("archive.s3.stall_timeout", "must be positive")
		}
		if s3.StallBytes < 0 {
			v.add("archive.s3.stall_bytes", "must not be negative")
		}
		if strings.Contains(s3.Prefix, "..") || strings.Contains(s3.Prefix, "//") {
			v.add("archive.s3.prefix", "%q: no \"..\" or empty segments", s3.Prefix)
		}
		if s3.CredentialsFile != "" {
			v.absPath("archive.s3.credentials_file", s3.CredentialsFile, "credentials file")
		}
	}
	v.policy("policy", c.Policy, nil)
	for _, src := range c.Sources {
		key := src.Key()
		base := src.Table.Common()
		if base.Name != "" && !sourceName.MatchString(base.Name) {
			v.add(key+".name", "%q: letters, digits, \".\", \"_\" and \"-\", at most 64, starting with a letter or digit", base.Name)
		}
		if base.ListTimeout != nil && *base.ListTimeout < 0 {
			v.add(key+".list_timeout", "%v: negative durations are not allowed", time.Duration(*base.ListTimeout))
		}
		for _, p := range src.Table.Paths() {
			if *p.Value == "" {
				continue // required ones are the table's own check
			}
			pkey := key + "." + p.Key
			if p.Role.Managed() {
				v.managed(pkey, *p.Value, p.Role)
			} else {
				v.absPath(pkey, *p.Value, "")
			}
		}
		src.Table.Check(&Check{v: v, prefix: key})
		v.policy(key, base.PolicyOverrides, src.Table)
	}
	v.overlaps()
	v.names()
	v.server()
	return joinErrors(v.errs)
}

// names reports two sources with one name: their runtimes' keys would be
// the same. A source with a problem of its own already (the same
// repository twice) is not reported again.
func (v *validator) names() {
	reported := func(key string) bool {
		for _, e := range v.errs {
			if e.Key == key || strings.HasPrefix(e.Key, key+".") {
				return true
			}
		}
		return false
	}
	first := map[string]string{} // name → key of the first source with it
	for _, src := range v.c.Sources {
		name, key := src.Name(), src.Key()
		if prev, ok := first[name]; ok && !reported(key) {
			v.add(key, "is the same source as %s (both named %q): give one of them its own name = \"...\"", prev, name)
		} else if !ok {
			first[name] = key
		}
	}
}

type validator struct {
	c    *Config
	errs []*Error
	// roots are the managed folders and repositories, in order.
	roots []area
}

type area struct {
	key, path string
	repo      bool // a repository: its own folder is not a runtime
	dirs      bool // a root whose every child folder is a runtime
}

func (v *validator) add(key, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.c.name, Line: v.c.lineOf(key), Key: key, Msg: RedactCredentials(fmt.Sprintf(format, args...))})
}

// Line returns the line of key ("worktrees[1].root") in the file c was
// parsed from, or of the nearest table holding it; 0 when unknown.
func (c *Config) Line(key string) int { return c.lineOf(key) }

// lineOf returns the line of key, or of the nearest table holding it.
func (c *Config) lineOf(key string) int {
	for k := key; k != ""; k = parentKey(k) {
		if l, ok := c.lines[k]; ok {
			return l
		}
	}
	return 0
}

func parentKey(k string) string {
	if strings.HasSuffix(k, "]") {
		return k[:strings.LastIndexByte(k, '[')]
	}
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}

// absPath checks a path that must be absolute; what names it in messages.
func (v *validator) absPath(key, p, what string) bool {
	switch {
	case p == "":
		v.add(key, "no default %s: neither $XDG_STATE_HOME nor $HOME is set; set %s", what, key)
	case p == "~" || strings.HasPrefix(p, "~/"):
		v.add(key, "%q: cannot expand ~ because $HOME is not set", p)
	case strings.HasPrefix(p, "~"):
		v.add(key, "%q: ~user is not supported: write the absolute path", p)
	case !filepath.IsAbs(p):
		v.add(key, "%q is not an absolute path", p)
	default:
		return true
	}
	return false
}

// managed checks a root or repo and remembers it for overlaps.
func (v *validator) managed(key, p string, role PathRole) {
	if !v.absPath(key, p, "") {
		return
	}
	p = filepath.Clean(p)
	if p == "/" {
		v.add(key, `refusing to manage "/"`)
		return
	}
	v.roots = append(v.roots, area{key: key, path: p, repo: role == PathRepo, dirs: role == PathDirs})
}

// overlaps reports folders claimed twice, and the ledger or archives inside
// a managed root.
func (v *validator) overlaps() {
	for j, b := range v.roots {
		for _, a := range v.roots[:j] {
			if msg := overlap(a, b); msg != "" {
				v.add(b.key, "%s", msg)
				break
			}
		}
	}
	for _, own := range []struct{ key, path string }{
		{"ledger.path", v.c.Ledger.Path},
		{"archive.dir", v.c.Archive.Dir},
	} {
		if !filepath.IsAbs(own.path) {
			continue // reported already
		}
		for _, r := range v.roots {
			if !r.repo && within(filepath.Clean(own.path), r.path) {
				v.add(own.key, "%s is inside %s (%s), which this program deletes from", own.path, r.key, r.path)
				break
			}
		}
	}
}

// overlap explains why b may not be configured after a, or returns "".
func overlap(a, b area) string {
	switch {
	case a.repo && b.repo:
		if a.path == b.path {
			return fmt.Sprintf("%s repeats %s", b.path, a.key)
		}
		return ""
	case a.repo || b.repo:
		repo, root := a, b
		if b.repo {
			repo, root = b, a
		}
		// A repository under a [[dirs]] root would be one of its runtimes. A
		// repository under a worktrees root, or a root inside a repository
		// (worktrees in ".worktrees/"), is a common layout.
		if root.dirs && within(repo.path, root.path) {
			return fmt.Sprintf("%s is inside %s (%s): it would be deleted as a runtime", repo.path, root.key, root.path)
		}
		return ""
	case a.path == b.path:
		return fmt.Sprintf("%s is also %s: a folder must belong to one source", b.path, a.key)
	case within(b.path, a.path):
		return fmt.Sprintf("%s is inside %s (%s): a folder must belong to one source", b.path, a.key, a.path)
	case within(a.path, b.path):
		return fmt.Sprintf("%s contains %s (%s): a folder must belong to one source", b.path, a.key, a.path)
	}
	return ""
}

// within reports whether clean absolute path p is dir or lies inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// subpath checks a path relative to a runtime folder or home.
func (v *validator) subpath(key, p, base string) {
	switch {
	case p == "":
		v.add(key, "empty path")
	case strings.HasPrefix(p, "~"):
		v.add(key, "%q: write the path relative to the %s, without ~", p, base)
	case filepath.IsAbs(p):
		v.add(key, "%q must be relative to the %s", p, base)
	case hasDotDot(p):
		v.add(key, `%q must not contain ".."`, p)
	case filepath.Clean(p) != p:
		v.add(key, "%q is not clean: write %q", p, filepath.Clean(p))
	}
}

func hasDotDot(p string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// policy checks the policy keys of one table (prefix "policy" or a source's
// key) and, for a source, its effective disk watermarks.
func (v *validator) policy(prefix string, o PolicyOverrides, src Table) {
	for i, d := range o.CacheDirs {
		key := fmt.Sprintf("%s.cache_dirs[%d]", prefix, i)
		if d == "." {
			v.add(key, `"." is the whole home: name a folder inside it`)
			continue
		}
		v.subpath(key, d, "runtime's home")
	}
	for i, n := range o.Rebuildable {
		key := fmt.Sprintf("%s.rebuildable[%d]", prefix, i)
		switch {
		case n == DefaultsEntry:
		case n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00"):
			v.add(key, "%q: a folder name (no /), or \"defaults\" for the built-in list", n)
		case strings.EqualFold(n, ".git"):
			v.add(key, `".git" is someone's repository, never rebuildable`)
		case strings.ContainsAny(n, "*?["):
			v.add(key, "%q: rebuildable names are exact, not patterns", n)
		}
	}
	for i, p := range o.Keep {
		key := fmt.Sprintf("%s.keep[%d]", prefix, i)
		if _, err := filepath.Match(p, ""); p != DefaultsEntry && (p == "" || strings.ContainsAny(p, "/\x00") || err != nil) {
			v.add(key, "%q: a name pattern (path.Match, no /), or \"defaults\" for the built-in list", p)
		}
	}
	if o.DiskHigh != nil && *o.DiskHigh != 0 {
		v.fraction(prefix+".disk_high", *o.DiskHigh)
	}
	if o.DiskLow != nil {
		if *o.DiskLow == 0 {
			v.add(prefix+".disk_low", `"off" is not allowed: leave disk_low out for the default, or set disk_high = "off"`)
		} else {
			v.fraction(prefix+".disk_low", *o.DiskLow)
		}
	}
	for _, d := range []struct {
		name string
		v    *Duration
	}{
		{"retention", o.Retention},
		{"grace", o.Grace},
		{"idle_suspend", o.IdleSuspend},
		{"max_lifetime", o.MaxLifetime},
	} {
		if d.v != nil && *d.v < 0 {
			v.add(prefix+"."+d.name, "%v: negative durations are not allowed", time.Duration(*d.v))
		}
	}

	// The effective watermarks; a source that sets neither inherits a pair
	// checked in [policy] already.
	if o.DiskHigh == nil && o.DiskLow == nil {
		return
	}
	if !v.validFraction(o.DiskHigh) || !v.validFraction(o.DiskLow) || !v.validFraction(v.c.Policy.DiskHigh) {
		return // reported above
	}
	eff := v.c.PolicyFor(src)
	switch {
	case eff.DiskHigh == 0:
		if o.DiskLow != nil {
			v.add(prefix+".disk_low", "is set, but disk_high is not")
		}
	case eff.DiskLow >= eff.DiskHigh:
		key, from := prefix+".disk_low", ""
		if o.DiskLow == nil {
			key = prefix + ".disk_high"
		}
		if o.DiskHigh == nil {
			from = " (from [policy])"
		}
		v.add(key, "disk_low %v must be below disk_high %v%s", eff.DiskLow, eff.DiskHigh, from)
	}
}

func (v *validator) fraction(key string, f Fraction) {
	if err := checkFraction(float64(f)); err != nil {
		v.add(key, "%v %v", float64(f), err)
	}
}

// validFraction reports whether f is unset, off or in (0, 1).
func (v *validator) validFraction(f *Fraction) bool {
	return f == nil || *f == 0 || checkFraction(float64(*f)) == nil
}
