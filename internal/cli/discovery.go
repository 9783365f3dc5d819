package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/views"
)

// discovering tells whether the command runs over a zero-configuration
// discovery: plan, ls or status with no --config, no --repo or --dir and
// no --server.
func (c *command) discovering() bool { return c.discovers && c.unconfigured() }

// unconfigured tells whether the command was given no configuration and
// no source flags (and no daemon).
func (c *command) unconfigured() bool {
	return c.g.config == "" && c.g.server == "" && len(c.g.repos) == 0 && len(c.g.dirs) == 0
}

func (c *command) discoverOptions() ops.DiscoverOptions {
	if c.env.Discover != nil {
		return *c.env.Discover
	}
	return ops.DiscoverOptions{}
}

// errNothingDiscovered ends a discovering command that found nothing to
// manage: what was looked for is printed already; exit 0.
var errNothingDiscovered = errors.New("nothing discovered")

// discoveredService runs the discovery, prints what it found (on standard
// error when the command prints JSON) and opens a dry-run service over it.
func (c *command) discoveredService(ctx context.Context) (ops.Service, error) {
	d, err := ops.Discover(ctx, c.discoverOptions())
	if err != nil {
		return nil, err
	}
	if !d.Found() {
		if c.jsonOut {
			return nil, errors.Join(errNothingDiscovered, printJSON(c.env.Stdout, d.View))
		}
		printDiscovery(c.env.Stdout, d.View)
		return nil, errNothingDiscovered
	}
	w := c.env.Stdout
	if c.jsonOut {
		w = c.env.Stderr
	}
	printDiscovery(w, d.View)
	return ops.OpenDiscovered(ctx, d, ops.Options{})
}

// printDiscovery prints what a discovery found, as sources with the
// table each corresponds to, and where it looked.
func printDiscovery(w io.Writer, d views.Discovery) {
	managed := 0
	for _, s := range d.Sources {
		if s.Source != "" {
			managed++
		}
	}
	switch {
	case len(d.Sources) == 0:
		fmt.Fprintln(w, "No configuration given (--config) and no runtime an agent left was found on this machine.")
	case managed == 0:
		fmt.Fprintln(w, "No configuration given (--config); discovery found nothing it can manage:")
	default:
		fmt.Fprintf(w, "No configuration given (--config); discovered %d source(s), shown as the configuration that manages them\n", managed)
		fmt.Fprintln(w, "(\"reclaimer init --write reclaimer.toml\" writes it; discovery never acts: apply needs --config):")
	}
	for _, s := range d.Sources {
		agent := s.Agent
		if agent == "" {
			agent = "Other worktrees"
		}
		fmt.Fprintf(w, "\n  %s (%s): %d found", agent, s.Kind, len(s.Found))
		if s.Source != "" {
			fmt.Fprintf(w, ", source %s", s.Source)
		}
		fmt.Fprintln(w)
		if s.Table != "" {
			for _, line := range strings.Split(strings.TrimSuffix(s.Table, "\n"), "\n") {
				prefix := "    "
				if s.Unmanaged != "" {
					prefix = "    # "
				}
				fmt.Fprintln(w, prefix+line)
			}
		}
		for _, f := range s.Found {
			fmt.Fprintln(w, "      "+f.String())
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
		if s.Unmanaged != "" {
			fmt.Fprintf(w, "    not managed: %s\n", s.Unmanaged)
		}
	}
	fmt.Fprintln(w, "\nLooked for:")
	t := newTable(w)
	for _, p := range d.Looked {
		fmt.Fprintf(t, "  %s\t%s\t%s\n", p.For, p.Path, p.Result)
	}
	t.Flush()
	fmt.Fprintln(w)
}

var initCmd = spec{name: "init", args: "", summary: "discover what agents left here and print (or --write) a commented configuration for it", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		write := fs.String("write", "", "write the configuration to `FILE` instead of printing it (never over an existing file without --force)")
		force := fs.Bool("force", false, "with --write: replace an existing file")
		asJSON := fs.Bool("json", false, "print what was found (and the configuration) as JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if err := noArgs("init", args); err != nil {
				return err
			}
			if c.g.config != "" {
				return usagef("init writes a configuration from what it finds; --config reads one (use --write FILE)")
			}
			if *force && *write == "" {
				return usagef("--force goes with --write FILE")
			}
			d, err := ops.Discover(ctx, c.discoverOptions())
			if err != nil {
				return err
			}
			if *write != "" {
				if err := writeConfigFile(*write, d.View.Config, *force); err != nil {
					return err
				}
			}
			switch {
			case *asJSON:
				return printJSON(c.env.Stdout, d.View)
			case *write == "":
				fmt.Fprint(c.env.Stdout, d.View.Config)
				return nil
			}
			printDiscovery(c.env.Stdout, d.View)
			if !d.Found() {
				fmt.Fprintf(c.env.Stdout, "Wrote %s with no source: add tables to it (docs/example.toml has every kind).\n", *write)
				return nil
			}
			fmt.Fprintf(c.env.Stdout, "Wrote %s. Review it, then: reclaimer --config %s plan\n", *write, *write)
			return nil
		}
	}}

// writeConfigFile writes text to path (mode 0600): never over an existing
// file unless force, and then through a temporary file renamed into place.
func writeConfigFile(path, text string, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return usagef("init: %s exists: not replaced (--force replaces it)", path)
		}
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return fmt.Errorf("init: write %s: %w", path, err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".reclaimer-init-*")
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	_, err = tmp.WriteString(text)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("init: write %s: %w", path, err)
	}
	return nil
}
