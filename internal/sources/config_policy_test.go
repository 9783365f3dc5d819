package sources

import (
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/policy"
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
	base := policy.Settings{
		CacheDirs: []string{".cache"}, DiskHigh: 0.8, DiskLow: 0.7,
		Retention: days(14), Grace: 24 * time.Hour, IdleSuspend: 20 * time.Minute,
	}
	tests := []struct {
		name   string
		src    config.Table
		change func(*policy.Settings)
	}{
		{"global", nil, func(*policy.Settings) {}},
		{"unset falls back", tables[*WorktreesTable](c)[0], func(*policy.Settings) {}},
		{"source overrides", tables[*WorktreesTable](c)[1], func(p *policy.Settings) {
			p.Retention, p.Grace, p.CacheDirs = days(3), time.Hour, []string{}
		}},
		{"off overrides", tables[*DirsTable](c)[0], func(p *policy.Settings) {
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
	p := c.PolicyFor(tables[*DirsTable](c)[0])
	p.CacheDirs[0] = "changed"
	if tables[*DirsTable](c)[0].CacheDirs[0] != ".npm" || c.PolicyFor(tables[*DirsTable](c)[0]).CacheDirs[0] != ".npm" {
		t.Error("PolicyFor returned a slice shared with the Config")
	}
	d := c.PolicyFor(nil)
	d.CacheDirs[0] = "changed"
	if c.Policy.CacheDirs[0] != ".cache" {
		t.Error("PolicyFor(nil) returned a slice shared with the Config")
	}
}

func TestPolicyForDefaults(t *testing.T) {
	var c config.Config
	got := c.PolicyFor(nil)
	want := policy.Settings{CacheDirs: []string{".cache", ".npm"}, Grace: config.DefaultGrace}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v; want %+v", got, want)
	}
	got.CacheDirs[0] = "changed"
	if config.DefaultCacheDirs()[0] != ".cache" {
		t.Error("PolicyFor shares the default cache dirs")
	}
	src := &DirsTable{Root: "/d", SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{DiskHigh: ptr[config.Fraction](0.9)}}}
	if p := c.PolicyFor(src); p.DiskHigh != 0.9 || p.DiskLow != 0.85 {
		t.Errorf("source disk high 0.9: got high %v low %v", p.DiskHigh, p.DiskLow)
	}
}

func TestDefaultDiskLow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ high, want float64 }{
		{0.85, 0.80}, {0.9, 0.85}, {0.95, 0.9}, {0.1, 0.05}, {0.3, 0.25}, {0.09, 0.045}, {0.01, 0.005}, {0.999, 0.949},
	} {
		if got := config.DefaultDiskLow(tt.high); got != tt.want {
			t.Errorf("config.DefaultDiskLow(%v) = %v; want %v", tt.high, got, tt.want)
		}
	}
}

// TestSources: tables are listed in the registry's order, then the file's;
// each has its key, its stable name (its name key, else its kind and
// identity) and its label as written.
func TestSources(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, "[[dirs]]\nroot = \"/d\"\n[[worktrees]]\nrepo = \"/r\"\n[[worktrees]]\nroot = \"/w\"\nname = \"agents\"\n")
	var got []string
	for _, s := range c.Sources {
		got = append(got, s.Key()+" "+s.Name()+" "+s.Label())
	}
	want := []string{`worktrees[0] worktrees:/r [[worktrees]] repo = "/r"`, `worktrees[1] agents [[worktrees]] name = "agents"`,
		`dirs[0] dirs:/d [[dirs]] root = "/d"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sources %q; want %q", got, want)
	}
}
