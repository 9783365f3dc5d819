package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/sources"
)

// service opens what the command talks to: a running daemon with
// --server, else the configuration here (--config, or --repo and --dir).
func (c *command) service(ctx context.Context) (ops.Service, error) {
	if c.g.server != "" {
		if len(c.g.repos) > 0 || len(c.g.dirs) > 0 {
			return nil, usagef("--repo and --dir name this host's sources: they cannot be sent to a daemon with --server")
		}
		return c.dial()
	}
	cfg, err := c.loadConfig()
	if err != nil {
		return nil, err
	}
	return ops.Open(ctx, ops.Options{Config: cfg, Recover: true})
}

// loadConfig reads --config, or builds one from --repo and --dir.
func (c *command) loadConfig() (*config.Config, error) {
	if c.g.config != "" {
		if len(c.g.repos) > 0 || len(c.g.dirs) > 0 {
			return nil, usagef("--repo and --dir cannot be combined with --config")
		}
		cfg, err := sources.Load(c.g.config)
		if err != nil {
			return nil, usageError{err}
		}
		return cfg, nil
	}
	cfg := config.Default()
	if err := sources.AdHoc(cfg, c.g.repos, c.g.dirs); err != nil {
		return nil, usageError{err}
	}
	if err := cfg.ResolvePaths(); err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// refsOf turns the names on the command line into runtime references. A
// name that is a path here (relative or absolute: a folder that exists,
// or one that looks like a path) is sent as an absolute path, since a
// daemon does not share this shell's current folder.
func refsOf(names []string) []ops.Ref {
	out := make([]ops.Ref, len(names))
	for i, n := range names {
		out[i] = refOf(n)
	}
	return out
}

func refOf(name string) ops.Ref {
	if looksLikePath(name) {
		if abs, err := filepath.Abs(name); err == nil {
			return ops.Ref{Name: abs}
		}
	}
	return ops.Ref{Name: name}
}

func looksLikePath(name string) bool {
	switch {
	case filepath.IsAbs(name), name == ".", name == "..", strings.HasPrefix(name, "./"), strings.HasPrefix(name, "../"):
		return true
	case strings.Contains(name, "/"):
		// "backend/ID" or "source/ID", unless such a folder is here.
		fi, err := os.Stat(name)
		return err == nil && fi.IsDir()
	}
	return false
}
