package cli

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ops"
)

var ledgerCmd = spec{name: "ledger", args: "copy --to URL", summary: "move this host's SQLite ledger into an empty PostgreSQL one (joining a fleet), checked", local: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *command, []string) error {
		to := fs.String("to", "", "the PostgreSQL ledger's URL (postgres://user@host/db or postgres:///db?host=/run/postgresql)")
		from := fs.String("from", "", "the SQLite ledger (default: [ledger] path of --config)")
		replica := fs.String("replica", "", "this host's name in the fleet (default: [server] name, else the host name)")
		passwordFile := fs.String("password-file", "", "a file holding the role's password (else the URL's, PGPASSWORD or ~/.pgpass)")
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, c *command, args []string) error {
			if len(args) != 1 || args[0] != "copy" {
				return usagef("ledger: the one subcommand is copy: reclaimer ledger copy --to URL")
			}
			if c.g.server != "" {
				return usagef("ledger copy runs on this host; leave out --server")
			}
			cfg, err := c.loadConfig()
			if err != nil {
				return err
			}
			req := ops.CopyRequest{From: *from, To: *to, Replica: *replica}
			if *passwordFile != "" {
				probe := config.Config{Ledger: config.Ledger{PasswordFile: *passwordFile}}
				if req.Password, err = probe.LedgerPassword(); err != nil && req.Password == "" {
					return err
				}
			}
			res, err := ops.CopyLedger(ctx, cfg, req)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(c.env.Stdout, res)
			}
			out := c.env.Stdout
			fmt.Fprintf(out, "copied %s into %s as replica %s\n", res.From, res.To, res.Replica)
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(res.Counts)) {
				parts = append(parts, fmt.Sprintf("%d %s", res.Counts[k], k))
			}
			fmt.Fprintf(out, "records: %s (read back: the same)\n", strings.Join(parts, ", "))
			fmt.Fprintf(out, "sha256 of every record, both sides: %s\n", res.Digest)
			for _, old := range slices.Sorted(maps.Keys(res.Renamed)) {
				fmt.Fprintf(out, "source %s is now %s\n", old, res.Renamed[old])
			}
			for _, f := range res.Foreign {
				fmt.Fprintf(out, "note: source %s is not in this configuration; its records were copied as they are\n", f)
			}
			return nil
		}
	}}
