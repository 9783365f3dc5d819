package cli

import (
	"runtime/debug"
	"strings"
)

// buildStamp is what a binary knows about the source it was built from.
type buildStamp struct {
	Version, Commit, Time, Go string
	Modified                  bool
}

// versionText is `reclaimer --version`: the module version, the VCS
// revision and its time when the build recorded them (go build stamps
// them unless -buildvcs=false), else what -ldflags -X injected.
func versionText(env Env) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return stampOf(info, env).String()
}

// stampOf reads the build info (nil when the binary has none) and lets
// the injected values win: a release build says what its pipeline
// decided, even when the toolchain stamped something else.
func stampOf(info *debug.BuildInfo, env Env) buildStamp {
	s := buildStamp{Version: "(devel)"}
	if info != nil {
		if v := info.Main.Version; v != "" {
			s.Version = v
		}
		s.Go = info.GoVersion
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				s.Commit = kv.Value
			case "vcs.modified":
				s.Modified = kv.Value == "true"
			case "vcs.time":
				s.Time = kv.Value
			}
		}
	}
	if env.Version != "" && env.Version != "dev" {
		s.Version = env.Version
	}
	if env.Commit != "" {
		s.Commit, s.Modified = env.Commit, false
	}
	if env.BuildTime != "" {
		s.Time = env.BuildTime
	}
	return s
}

func (s buildStamp) String() string {
	out := "reclaimer " + s.Version
	var parts []string
	if s.Commit != "" {
		c := s.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if s.Modified {
			c += " (modified)"
		}
		parts = append(parts, "commit "+c)
	}
	if s.Time != "" {
		parts = append(parts, s.Time)
	}
	if s.Go != "" {
		parts = append(parts, s.Go)
	}
	if len(parts) > 0 {
		out += " (" + strings.Join(parts, ", ") + ")"
	}
	return out
}
