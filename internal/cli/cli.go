package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Env is what a command runs with; tests swap the streams.
type Env struct {
	Stdout, Stderr io.Writer
	// IsTerminal tells whether Stderr is a terminal (progress lines).
	IsTerminal bool
	// Version, Commit and BuildTime override what the build info says
	// (set at build time with -ldflags "-X main.version=... -X
	// main.commit=... -X main.date=..."); "" (or "dev" for Version) reads
	// the build info.
	Version, Commit, BuildTime string
	// Discover overrides where a zero-configuration discovery looks
	// (tests lay out homes in temporary folders); nil: this machine's.
	Discover *ops.DiscoverOptions
}

// command is one run of the CLI: its global flags, the service it talks
// to, and what decides its exit code.
type command struct {
	env Env
	g   globals
	// failed: some action failed, or the observation had problems: exit 1.
	failed bool
	// configError: the problems make it a configuration error (no source): exit 2.
	configError bool
	// discovers: the command runs over a discovery when given no
	// configuration (plan, ls, status); jsonOut: it prints JSON.
	discovers, jsonOut bool
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	config, server, tokenFile string
	repos, dirs               multi
}

func (g *globals) register(fs *flag.FlagSet, sources bool) {
	fs.StringVar(&g.config, "config", g.config, "configuration file (TOML)")
	fs.StringVar(&g.server, "server", g.server, "ask a running daemon at this URL (http://host:port or unix:/path)")
	fs.StringVar(&g.tokenFile, "token-file", g.tokenFile, "the daemon's API token (default: [server] token_file, or api.token in the state folder)")
	if sources {
		fs.Var(&g.repos, "repo", "without --config: a repository whose linked worktrees are runtimes (repeatable)")
		fs.Var(&g.dirs, "dir", "without --config: a folder whose child folders are runtimes (repeatable)")
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// spec is one command: its name, arguments and summary for its help, its
// flags, and what it runs.
type spec struct {
	name, args, summary string
	// sources: it opens the configuration's sources (it takes --repo and
	// --dir); local: it never asks a daemon (--server does not apply).
	sources, local bool
	// readOnly commands observe once and exit: they skip garbage
	// collection (oneShotGC).
	readOnly bool
	// discovers: given no configuration, no source flags and no daemon,
	// it runs over what a discovery finds (a dry run only).
	discovers bool
	// setup registers the command's own flags and returns what runs it
	// with its positional arguments.
	setup func(fs *flag.FlagSet) func(ctx context.Context, c *command, args []string) error
}

// commands is every command, in the order the help lists them.
var commands []spec

func init() {
	commands = []spec{
		planCmd, applyCmd, lsCmd, statusCmd, explainCmd, initCmd,
		touchCmd, pinCmd, unpinCmd, leaseCmd, retentionCmd, deleteCmd, restoreCmd,
		archivesCmd, logCmd, sizeCmd, usageCmd, nativeCmd, serveCmd, ledgerCmd, versionCmd,
	}
}

func lookup(name string) (spec, bool) {
	for _, s := range commands {
		if s.name == name {
			return s, true
		}
	}
	return spec{}, false
}

// Run runs one command line and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	c := &command{env: env}
	// The global flags may come before the command's name.
	global := newFlags("reclaimer", env)
	c.g.register(global, true)
	help := global.Bool("help", false, "print this help")
	short := global.Bool("h", false, "print this help")
	version := global.Bool("version", false, "print the version")
	if err := global.Parse(args); err != nil {
		return c.exit(usageError{err})
	}
	rest := global.Args()
	switch {
	case *version:
		fmt.Fprintln(env.Stdout, versionText(env))
		return ExitOK
	case *help || *short:
		printUsage(env.Stdout)
		return ExitOK
	case len(rest) == 0:
		printUsage(env.Stderr)
		return ExitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			printUsage(env.Stdout)
			return ExitOK
		}
		name, rest = rest[0], []string{"--help"}
	}
	sp, ok := lookup(name)
	if !ok {
		fmt.Fprintf(env.Stderr, "reclaimer: unknown command %q\n\n", name)
		printUsage(env.Stderr)
		return ExitUsage
	}
	fs := newFlags(name, env)
	c.g.register(fs, sp.sources)
	run := sp.setup(fs)
	pos, err := parseAnywhere(fs, rest)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printCommandUsage(env.Stdout, sp, fs)
		return ExitOK
	case err != nil:
		fmt.Fprintf(env.Stderr, "reclaimer %s: %v\n", name, err)
		printCommandUsage(env.Stderr, sp, fs)
		return ExitUsage
	}
	if sp.local && c.g.server != "" && name != "serve" {
		return c.exit(usagef("%s runs on this host; it does not ask a daemon (leave out --server)", name))
	}
	if sp.readOnly {
		oneShotGC()
	}
	c.discovers = sp.discovers
	return c.exit(run(ctx, c, pos))
}

// parseAnywhere parses flags wherever they stand among the positional
// arguments (flag stops at the first positional one); "--" ends flags.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // usage is printed by the caller, on the right stream
	fs.Usage = func() {}
	return fs
}

// usageError marks bad usage or configuration (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// Category makes a usage error bad input, whatever it wraps.
func (u usageError) Category() ops.Category { return ops.CatBadRequest }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exit prints err and maps it, and what the command found, to an exit
// code: the category's (ops.Classify); else 2 when nothing is configured,
// 1 when something failed or could not be looked at, 0.
func (c *command) exit(err error) int {
	if errors.Is(err, errNothingDiscovered) {
		return ExitOK // what was looked for is printed
	}
	if err != nil {
		fmt.Fprintf(c.env.Stderr, "reclaimer: %v\n", plan.OneLine(err.Error()))
		return ops.Classify(err).Exit
	}
	switch {
	case c.configError:
		return ExitUsage
	case c.failed:
		return ExitFailed
	}
	return ExitOK
}

const overview = `usage: reclaimer [--config FILE] [--server URL [--token-file FILE]] <command> [arguments]

Reclaims the disk space and money that AI coding agents' runtimes leave behind.

commands:
`

const notes = `
Flags may stand anywhere on the line, before or after the command and its
arguments; "reclaimer COMMAND --help" tells one command's.

With --server URL every command but size, usage and serve asks a running
daemon (reclaimer serve) instead, with the same output; the token is read
from --token-file, [server] token_file of --config, or api.token in the state
folder. Without --config the sources are --repo PATH (a repository's linked
worktrees) and --dir PATH (a folder of run folders); with neither, plan, ls
and status run over what a discovery finds on this machine (the runtimes
OpenHands, Claude Code, Codex and Cursor leave in their known places), and
show the configuration each set corresponds to: "reclaimer init" writes it.
Discovery never acts: apply needs --config (or --repo, --dir).

An ID may be given as the runtime's ID, backend/ID, source/ID, or its path
(relative or absolute): its folder, its former folder once archived, or any
folder inside its home or workspaces. STEP is caches, dependencies, suspend,
archive or delete.

Exit codes: 0 done; 1 something failed, a runtime was not found, or a source
could not be looked at (problems, on standard error and in every --json);
2 bad usage or configuration (no source at all included).
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, overview)
	for _, s := range commands {
		line := s.name
		if s.args != "" {
			line += " " + s.args
		}
		if len(line) > 30 {
			fmt.Fprintf(w, "  %s\n  %-30s %s\n", line, "", s.summary)
			continue
		}
		fmt.Fprintf(w, "  %-30s %s\n", line, s.summary)
	}
	fmt.Fprint(w, notes)
}

// printCommandUsage prints one command's help: its line, its summary, and
// only its own flags (the global ones in one line).
func printCommandUsage(w io.Writer, s spec, fs *flag.FlagSet) {
	line := "reclaimer " + s.name
	if s.args != "" {
		line += " " + s.args
	}
	fmt.Fprintf(w, "usage: %s [flags]\n\n%s\n", line, s.summary)
	global := []string{"config", "server", "token-file", "repo", "dir"}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(global, f.Name) {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintln(w, "\nflags:")
		for _, f := range own {
			name, help := flag.UnquoteUsage(f)
			arg := "--" + f.Name
			if len(f.Name) == 1 {
				arg = "-" + f.Name
			}
			if name != "" {
				arg += " " + name
			}
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" && f.DefValue != "-1" {
				help += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(w, "  %-24s %s\n", arg, help)
		}
	}
	g := "--config FILE, --server URL, --token-file FILE"
	if s.sources {
		g += "; without --config: --repo PATH, --dir PATH"
	}
	if s.local {
		g = "--config FILE"
		if s.name == "size" || s.name == "usage" || s.name == "version" || s.name == "init" {
			g = ""
		}
	}
	if g != "" {
		fmt.Fprintf(w, "\nglobal flags: %s (see reclaimer --help)\n", g)
	}
}

// oneShotGC tunes the collector for a command that observes the world
// once, prints and exits (plan, ls, status). Nearly all it allocates lives
// until it exits, so collecting only rescans it: at 100,000 runtimes
// collection was 40 % of a pass's CPU. It collects only when the heap
// nears a quarter of the machine's memory (at least 512 MiB), which a plan
// over a million runtimes stays under. apply (whose archives and deletions
// make garbage for as long as they run) and the daemon keep the default;
// an operator's GOGC or GOMEMLIMIT wins.
func oneShotGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(512 << 20)
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		limit = max(limit, int64(si.Totalram)*int64(si.Unit)/4)
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
}
