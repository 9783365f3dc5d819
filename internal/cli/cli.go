package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/config"
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
	// IsTerminal tells whether Stderr is a terminal (progress bars).
	IsTerminal bool
	Version    string
}

const usage = `usage: reclaimer [--config FILE] [--server URL [--token-file FILE]] <command> [arguments]

Reclaims the disk space and money that AI coding agents' runtimes leave behind.

commands:
  plan      [--json] [--out FILE] [--runtime ID]... [--step STEP]...
            the dry run: what a pass would do, and why
  apply     [--plan FILE] [--json] [--runtime ID]... [--step STEP]...
            one pass now (or exactly the saved plan, never more)
  ls        [--json]                 the runtimes and what is known of them
  status    [--json]                 disk usage, runtimes by state, last pass
  touch ID                           record activity now
  pin ID [--reason TEXT]             never touch it
  unpin ID
  lease ID --for DURATION            do not touch it until then
  retention ID (--days N | --default)
  delete ID                          remove it now (archived first if it holds unsaved work)
  restore ID [--to PATH] [--archive ARCHIVE_ID]
                                     bring an archived runtime back (default: its newest archive)
  archives [ID] [--json]             the archives, or one archive (or one runtime's) in full
  archives prune --older-than DURATION [--dry-run] [--json]
                                     remove archives older than that (journaled)
  log [--json] [--runtime ID] [--limit N]   the journal of actions
  size [--json] PATH...              measure trees as reclaimer deletes them
  usage [--json] PATH...             how full each path's filesystem is
  native plan [--json]               remote sandboxes: provider timers now, what the policy wants, the drift
  native sync [--json]               write the policy into the providers' timers where they allow it
  serve [--config FILE]              the daemon: passes every [server] interval, and the HTTP API
  version

With --server URL, plan, apply, ls, status, touch, pin, unpin, lease,
retention, delete and log ask a running daemon (reclaimer serve) instead,
with the same output; the token is read from --token-file, [server]
token_file of --config, or api.token in the state folder.

Without --config, plan and apply accept --repo PATH (a repository's linked
worktrees) and --dir PATH (a folder of run folders). An ID may also be given
as the runtime's path. STEP is caches, dependencies, suspend, archive or delete.
`

// Run runs one command line and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	global := flag.NewFlagSet("reclaimer", flag.ContinueOnError)
	global.SetOutput(env.Stderr)
	configPath := global.String("config", "", "configuration file (TOML)")
	serverURL := global.String("server", "", "talk to a running daemon at this URL (http://host:port or unix:/path)")
	tokenFile := global.String("token-file", "", "the daemon's API token (default: [server] token_file, or api.token in the state folder)")
	global.Usage = func() { fmt.Fprint(env.Stderr, usage) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return ExitUsage
	}
	c := &command{env: env, configPath: *configPath, server: *serverURL, tokenFile: *tokenFile}
	name, rest := args[0], args[1:]
	switch name {
	case "plan", "ls", "status":
		oneShotGC()
	}
	var err error
	if c.server != "" && remoteCommands[name] {
		return c.exit(c.remote(ctx, name, rest))
	}
	if c.server != "" && (name == "restore" || name == "serve") {
		fmt.Fprintf(env.Stderr, "reclaimer: %s runs on the daemon's host, without --server\n", name)
		return ExitUsage
	}
	switch name {
	case "version", "--version":
		fmt.Fprintf(env.Stdout, "reclaimer %s\n", env.Version)
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(env.Stdout, usage)
		return ExitOK
	case "plan":
		err = c.plan(ctx, rest)
	case "apply":
		err = c.apply(ctx, rest)
	case "ls":
		err = c.ls(ctx, rest)
	case "status":
		err = c.status(ctx, rest)
	case "touch", "pin", "unpin", "lease", "retention":
		err = c.mark(ctx, name, rest)
	case "delete":
		err = c.delete(ctx, rest)
	case "restore":
		err = c.restore(ctx, rest)
	case "archives":
		err = c.archives(ctx, rest)
	case "log":
		err = c.log(ctx, rest)
	case "size":
		err = c.size(ctx, rest)
	case "usage":
		err = c.usage(rest)
	case "native":
		err = c.nativeCmd(ctx, rest)
	case "serve":
		err = c.serve(ctx, rest)
	default:
		fmt.Fprintf(env.Stderr, "reclaimer: unknown command %q\n\n%s", name, usage)
		return ExitUsage
	}
	return c.exit(err)
}

type command struct {
	env        Env
	configPath string
	server     string // --server: the commands go to a running daemon
	tokenFile  string
	failed     bool // some action failed; exit 1
}

// usageError marks bad usage or configuration (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func (c *command) exit(err error) int {
	if err != nil {
		fmt.Fprintf(c.env.Stderr, "reclaimer: %v\n", err)
		var u usageError
		if errors.As(err, &u) || errors.Is(err, config.ErrInvalid) {
			return ExitUsage
		}
		return ExitFailed
	}
	if c.failed {
		return ExitFailed
	}
	return ExitOK
}

// sourceFlags are --repo and --dir, for running without a config file.
type sourceFlags struct{ repos, dirs multi }

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.Var(&s.repos, "repo", "a repository whose linked worktrees are runtimes (repeatable)")
	fs.Var(&s.dirs, "dir", "a folder whose child folders are runtimes (repeatable)")
}

// loadConfig reads --config, or builds one from --repo and --dir.
func (c *command) loadConfig(src *sourceFlags) (*config.Config, error) {
	if c.configPath != "" {
		if src != nil && (len(src.repos) > 0 || len(src.dirs) > 0) {
			return nil, usagef("--repo and --dir cannot be combined with --config")
		}
		cfg, err := config.Load(c.configPath)
		if err != nil {
			return nil, usageError{err}
		}
		return cfg, nil
	}
	cfg := config.Default()
	if src != nil {
		for _, r := range src.repos {
			if err := cfg.AddWorktreeRepo(r); err != nil {
				return nil, usageError{err}
			}
		}
		for _, d := range src.dirs {
			if err := cfg.AddDirRoot(d); err != nil {
				return nil, usageError{err}
			}
		}
	}
	if err := cfg.ResolvePaths(); err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	return nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
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
