package cli

import (
	"context"

	"github.com/reclaimer/reclaimer/internal/server"
)

// serve runs the daemon until a stop signal.
func (c *command) serve(ctx context.Context, args []string) error {
	fs := newFlags("serve", c.env)
	cfg := fs.String("config", c.configPath, "configuration file (TOML)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments")
	}
	return server.Run(ctx, server.Options{ConfigPath: *cfg, Version: c.env.Version, Logs: c.env.Stderr, Signals: true})
}
