package config

import (
	"reflect"
	"testing"
	"time"
)

func TestPolicyForMerge(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, `
[policy]
cache_dirs = [".cache"]
disk_high = 0.8
disk_low = 0.7
retention = "14d"
idle_suspend = "20m"

[[worktrees]]
repo = "/r"

[[worktrees]]
root = "/w"
retention = "3d"
grace = "1h"
cache_dirs = []

[[dirs]]
root = "/d"
retention = "off"
max_lifetime = "12h"
disk_low = 0.5
cache_dirs = [".npm", ".cache/pip"]
`)
	base := Policy{
		CacheDirs: []string{".cache"}, DiskHigh: 0.8, DiskLow: 0.7,
		Retention: days(14), Grace: 24 * time.Hour, IdleSuspend: 20 * time.Minute,
	}
	tests := []struct {
		name   string
		src    Source
		change func(*Policy)
	}{
		{"global", nil, func(*Policy) {}},
		{"unset falls back", c.Worktrees[0], func(*Policy) {}},
		{"source overrides", c.Worktrees[1], func(p *Policy) {
			p.Retention, p.Grace, p.CacheDirs = days(3), time.Hour, []string{}
		}},
		{"off overrides", c.Dirs[0], func(p *Policy) {
			p.Retention, p.MaxLifetime, p.DiskLow = 0, 12*time.Hour, 0.5
			p.CacheDirs = []string{".npm", ".cache/pip"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			want.CacheDirs = append([]string(nil), base.CacheDirs...)
			tt.change(&want)
			if got := c.PolicyFor(tt.src); !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}

	// The result shares nothing with the Config.
	p := c.PolicyFor(c.Dirs[0])
	p.CacheDirs[0] = "changed"
	if c.Dirs[0].CacheDirs[0] != ".npm" || c.PolicyFor(c.Dirs[0]).CacheDirs[0] != ".npm" {
		t.Error("PolicyFor returned a slice shared with the Config")
	}
	d := c.PolicyFor(nil)
	d.CacheDirs[0] = "changed"
	if c.Policy.CacheDirs[0] != ".cache" {
		t.Error("PolicyFor(nil) returned a slice shared with the Config")
	}
}

func TestPolicyForDefaults(t *testing.T) {
	var c Config
	got := c.PolicyFor(nil)
	want := Policy{CacheDirs: []string{".cache", ".npm"}, Grace: DefaultGrace}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v; want %+v", got, want)
	}
	got.CacheDirs[0] = "changed"
	if DefaultCacheDirs()[0] != ".cache" {
		t.Error("PolicyFor shares the default cache dirs")
	}
	src := &DirSource{Root: "/d", PolicyOverrides: PolicyOverrides{DiskHigh: ptr[Fraction](0.9)}}
	if p := c.PolicyFor(src); p.DiskHigh != 0.9 || p.DiskLow != 0.85 {
		t.Errorf("source disk high 0.9: got high %v low %v", p.DiskHigh, p.DiskLow)
	}
}

func TestDefaultDiskLow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ high, want float64 }{
		{0.85, 0.80}, {0.9, 0.85}, {0.95, 0.9}, {0.1, 0.05}, {0.3, 0.25}, {0.09, 0.045}, {0.01, 0.005}, {0.999, 0.949},
	} {
		if got := DefaultDiskLow(tt.high); got != tt.want {
			t.Errorf("DefaultDiskLow(%v) = %v; want %v", tt.high, got, tt.want)
		}
	}
}

func TestSources(t *testing.T) {
	var _ Source = WorktreeSource{}
	var _ Source = &DirSource{}
	testEnv(t)
	c := mustLoad(t, "[[dirs]]\nroot = \"/d\"\n[[worktrees]]\nrepo = \"/r\"\n[[worktrees]]\nroot = \"/w\"\n")
	var got []string
	for _, s := range c.sources() {
		got = append(got, s.key+" "+s.src.Table())
	}
	want := []string{"worktrees[0] worktrees", "worktrees[1] worktrees", "dirs[0] dirs"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sources %q; want %q", got, want)
	}
}
