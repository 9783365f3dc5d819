package config

import (
	"math"
	"slices"
	"time"

	"github.com/reclaimer/reclaimer/internal/ignored"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// PolicyOverrides holds the policy keys as written in one table: the global
// [policy] table, or a source table such as [[worktrees]] or [[dirs]] (which
// embed it through SourceBase, so any policy key may appear there). A nil field (nil slice for
// CacheDirs) means the key was left out and the value is inherited: source
// table ← [policy] ← built-in default. PolicyFor resolves the chain.
type PolicyOverrides struct {
	// CacheDirs (cache_dirs) are the folders of a runtime's home that the
	// caches step empties while the runtime is stopped; relative to the
	// home, clean, without "..". Default [".cache", ".npm"]. An empty array
	// (cache_dirs = []) turns the caches step off.
	CacheDirs []string `toml:"cache_dirs"`

	// Rebuildable (rebuildable) are the folder names the dependencies step
	// sheds (and archives leave out) whatever they hold: dependencies and
	// build output a project rebuilds. Exact names, case-insensitive. The
	// entry "defaults" stands for the built-in list (node_modules, .venv,
	// target, build, dist, ...): ["defaults", "elm-stuff"] extends it, a
	// list without it replaces it, [] leaves only the keep rule.
	Rebuildable []string `toml:"rebuildable"`

	// Keep (keep) are name patterns (path.Match on one name, case-
	// insensitive) of what a user wants back: an ignored folder not in
	// Rebuildable is shed only when nothing in it matches one. "defaults"
	// stands for the built-in list (.env*, *.pem, *credentials*,
	// *.tfstate*, id_*, *.key, ...); a list without it replaces it. A .git
	// at any depth keeps any folder, whatever the lists say.
	Keep []string `toml:"keep"`

	// DiskHigh (disk_high) is the high watermark of the disk budget: when
	// the filesystem holding the runtimes is fuller than this, the budget
	// policy frees space until it is below DiskLow. A fraction (0.85) or a
	// percentage ("85%"); "off" turns an inherited budget off. Default off.
	DiskHigh *Fraction `toml:"disk_high"`

	// DiskLow (disk_low) is the low watermark; it must be below DiskHigh.
	// Default: DiskHigh − 0.05 (half of DiskHigh when that is below 0.1).
	// A table that sets disk_high without disk_low gets that default, not
	// an inherited disk_low: the two are one setting.
	DiskLow *Fraction `toml:"disk_low"`

	// Retention (retention) is how long an idle runtime is kept before it is
	// archived (when it holds unsaved work) and deleted. Default off.
	Retention *Duration `toml:"retention"`

	// Grace (grace) is the notice period: a runtime is shown as scheduled,
	// and a notice goes out, at least this long before it is archived or
	// deleted. Default 24h; "0s" or "off" means no notice period.
	Grace *Duration `toml:"grace"`

	// IdleSuspend (idle_suspend) suspends a runtime idle this long, on
	// backends that can suspend (containers, remote sandboxes). Default off.
	IdleSuspend *Duration `toml:"idle_suspend"`

	// MaxLifetime (max_lifetime) suspends a runtime this long after it was
	// created, even when busy. Default off.
	MaxLifetime *Duration `toml:"max_lifetime"`

	// RegisteredOnly (registered_only) makes a source sweep orphans: what
	// its selector finds but no host registered through the API (or what
	// the last owning conversation released) is deleted, after the grace
	// period and a notice, archived first when it holds unsaved work.
	// Default false.
	RegisteredOnly *bool `toml:"registered_only"`
}

// DefaultsEntry in a rebuildable or keep list stands for the built-in list.
const DefaultsEntry = "defaults"

// expandDefaults replaces the "defaults" entry of list with defaults,
// keeping the order and dropping repeats; never nil (an empty list is a
// choice, not "unset").
func expandDefaults(list, defaults []string) []string {
	out := []string{}
	for _, e := range list {
		add := []string{e}
		if e == DefaultsEntry {
			add = defaults
		}
		for _, a := range add {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// DefaultGrace is the notice period when neither a source table nor
// [policy] sets grace.
const DefaultGrace = 24 * time.Hour

// DefaultCacheDirs returns the cache folders used when neither a source
// table nor [policy] sets cache_dirs: .cache and .npm.
func DefaultCacheDirs() []string { return []string{".cache", ".npm"} }

// DefaultDiskLow is the low watermark used when only disk_high is set:
// high − 0.05, or high / 2 when high is below 0.1 (so it stays positive),
// rounded to 6 decimals so that 0.85 gives exactly 0.80.
func DefaultDiskLow(high float64) float64 {
	low := high - 0.05
	if high < 0.1 {
		low = high / 2
	}
	return math.Round(low*1e6) / 1e6
}

// PolicyFor returns the effective policy of source table t: its
// overrides, then the [policy] table, then the built-in defaults.
// PolicyFor(nil) gives the global policy. The result shares nothing with c.
// It is meaningful only for a Config that passed Validate. The policy
// package's Settings is the one type of a resolved policy.
func (c *Config) PolicyFor(t Table) policy.Settings {
	p := policy.Settings{CacheDirs: DefaultCacheDirs(), Grace: DefaultGrace}
	lowSet := false
	apply(&p, c.Policy, &lowSet)
	if t != nil {
		apply(&p, t.Common().PolicyOverrides, &lowSet)
	}
	switch {
	case p.DiskHigh <= 0:
		p.DiskHigh, p.DiskLow = 0, 0
	case !lowSet:
		p.DiskLow = DefaultDiskLow(p.DiskHigh)
	}
	if p.CacheDirs == nil {
		p.CacheDirs = []string{}
	}
	p.CacheDirs = slices.Clone(p.CacheDirs)
	// Rebuildable and Keep stay nil when no table sets them: the built-in
	// lists (ignored.DefaultRebuildable, DefaultKeep) apply.
	return p
}

// apply lays o over p. Setting disk_high forgets an inherited disk_low
// (lowSet), so that a source raising or lowering its high watermark gets a
// matching low one.
func apply(p *policy.Settings, o PolicyOverrides, lowSet *bool) {
	if o.CacheDirs != nil {
		p.CacheDirs = o.CacheDirs
	}
	if o.Rebuildable != nil {
		p.Rebuildable = expandDefaults(o.Rebuildable, ignored.DefaultRebuildable)
	}
	if o.Keep != nil {
		p.Keep = expandDefaults(o.Keep, ignored.DefaultKeep)
	}
	if o.DiskHigh != nil {
		p.DiskHigh = float64(*o.DiskHigh)
		p.DiskLow, *lowSet = 0, false
	}
	if o.DiskLow != nil {
		p.DiskLow, *lowSet = float64(*o.DiskLow), true
	}
	setDuration(&p.Retention, o.Retention)
	setDuration(&p.Grace, o.Grace)
	setDuration(&p.IdleSuspend, o.IdleSuspend)
	setDuration(&p.MaxLifetime, o.MaxLifetime)
	if o.RegisteredOnly != nil {
		p.RegisteredOnly = *o.RegisteredOnly
	}
}

func setDuration(dst *time.Duration, v *Duration) {
	if v != nil {
		*dst = time.Duration(*v)
	}
}
