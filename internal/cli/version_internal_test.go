package cli

import (
	"runtime/debug"
	"testing"
)

// TestVersionStamp: the build info's VCS revision and time are printed
// when the build recorded them; without them (-buildvcs=false, no build
// info) the values injected with -ldflags -X are; injected values win.
func TestVersionStamp(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.25.0", Main: debug.Module{Path: "github.com/reclaimer/reclaimer", Version: "v0.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	bare := &debug.BuildInfo{GoVersion: "go1.25.0", Main: debug.Module{Path: "github.com/reclaimer/reclaimer", Version: "(devel)"}}
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		env  Env
		want string
	}{
		{"vcs stamped", stamped, Env{Version: "dev"}, "reclaimer v0.4.0 (commit 0123456789ab (modified), 2026-11-30T10:00:00Z, go1.25.0)"},
		{"no vcs", bare, Env{Version: "dev"}, "reclaimer (devel) (go1.25.0)"},
		{"no build info", nil, Env{}, "reclaimer (devel)"},
		{"injected", bare, Env{Version: "v1.2.3", Commit: "feedface", BuildTime: "2026-12-01T00:00:00Z"},
			"reclaimer v1.2.3 (commit feedface, 2026-12-01T00:00:00Z, go1.25.0)"},
		{"injected wins", stamped, Env{Version: "v1.2.3", Commit: "feedface"},
			"reclaimer v1.2.3 (commit feedface, 2026-11-30T10:00:00Z, go1.25.0)"},
	} {
		if got := stampOf(c.info, c.env).String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
