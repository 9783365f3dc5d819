package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one Run when Runner.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// DefaultMaxOutput bounds the stdout kept from one Run when
// Runner.MaxOutput is zero.
const DefaultMaxOutput = 512 << 20

// SafePath is the PATH git runs with; it is also where a bare Runner.Git
// name is looked up.
const SafePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrOutputTooLarge is wrapped by the *Error of a command whose stdout
// exceeded Runner.MaxOutput; the command was killed.
var ErrOutputTooLarge = errors.New("output too large")

// ErrEnvNotAllowed is returned by RunInput for an extra environment entry
// outside the allowlist.
var ErrEnvNotAllowed = errors.New("environment variable not allowed")

// Runner runs hardened git commands. The zero value is ready to use.
type Runner struct {
	// Timeout bounds each Run (probe included); zero or negative means
	// DefaultTimeout.
	Timeout time.Duration
	// Git is the git binary: a path, or a name looked up in SafePath.
	// Empty means "git".
	Git string
	// MaxOutput bounds the stdout kept, in bytes; zero or negative means
	// DefaultMaxOutput.
	MaxOutput int64
}

// Error is a git command that failed.
type Error struct {
	Args     []string // the caller's arguments, without the hardening options
	ExitCode int      // -1 when git did not exit by itself (killed, not started)
	Stderr   string   // trimmed, at most 64 KiB
	Err      error    // the underlying error (*exec.ExitError, context.DeadlineExceeded, ...)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("git")
	for _, a := range e.Args {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(a))
	}
	b.WriteString(": ")
	switch {
	case e.ExitCode >= 0:
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString("failed")
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// hardening precedes the caller's arguments on every command line.
var hardening = []string{
	"--no-pager",
	"--no-optional-locks",
	"--no-replace-objects",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.untrackedCache=false",
	"-c", "protocol.allow=never",
	"-c", "core.sshCommand=false",
	"-c", "core.askPass=",
	"-c", "credential.helper=",
	"-c", "diff.external=false",
	"-c", "core.pager=cat",
	"-c", "core.editor=false",
	"-c", "sequence.editor=false",
	"-c", "gpg.program=false",
	"-c", "gpg.openpgp.program=false",
	"-c", "gpg.x509.program=false",
	"-c", "gpg.ssh.program=false",
	"-c", "gpg.ssh.defaultKeyCommand=false",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "log.showSignature=false",
	"-c", "core.excludesFile=/dev/null",
	"-c", "core.attributesFile=/dev/null",
	"-c", "safe.directory=*",
	"-c", "submodule.recurse=false",
	"-c", "status.submoduleSummary=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "color.ui=false",
	"-c", "diff.noprefix=false",
	"-c", "diff.mnemonicPrefix=false",
	"-c", "diff.relative=false",
}

// baseEnv is the whole environment git starts with.
var baseEnv = []string{
	"PATH=" + SafePath,
	"HOME=/nonexistent",
	"LANG=C",
	"LC_ALL=C",
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_OPTIONAL_LOCKS=0",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_PROTOCOL_FROM_USER=0",
	"GIT_PAGER=cat",
}

// allowedEnv are the extra variables RunInput accepts.
var allowedEnv = map[string]bool{
	"GIT_INDEX_FILE":                   true,
	"GIT_AUTHOR_NAME":                  true,
	"GIT_AUTHOR_EMAIL":                 true,
	"GIT_AUTHOR_DATE":                  true,
	"GIT_COMMITTER_NAME":               true,
	"GIT_COMMITTER_EMAIL":              true,
	"GIT_COMMITTER_DATE":               true,
	"GIT_CEILING_DIRECTORIES":          true,
	"GIT_DISCOVERY_ACROSS_FILESYSTEM":  true,
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_COMMON_DIR":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_LITERAL_PATHSPECS":            true,
	"GIT_NOGLOB_PATHSPECS":             true,
	"GIT_ICASE_PATHSPECS":              true,
}

// noProbe are subcommands that never convert work-tree content, so they
// run without listing the config for filter drivers first.
var noProbe = map[string]bool{
	"rev-parse":    true,
	"version":      true,
	"config":       true,
	"for-each-ref": true,
	"show-ref":     true,
	"symbolic-ref": true,
	"var":          true,
	"ls-tree":      true,
	"rev-list":     true,
}

// diffFamily get --no-ext-diff --no-textconv --no-color after the
// subcommand.
var diffFamily = map[string]bool{
	"diff":         true,
	"diff-files":   true,
	"diff-index":   true,
	"diff-tree":    true,
	"log":          true,
	"show":         true,
	"format-patch": true,
	"whatchanged":  true,
}

func (r Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r Runner) maxOutput() int64 {
	if r.MaxOutput > 0 {
		return r.MaxOutput
	}
	return DefaultMaxOutput
}

// binary resolves Runner.Git without consulting the caller's PATH.
func (r Runner) binary() (string, error) {
	name := r.Git
	if name == "" {
		name = "git"
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(SafePath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("find %q in %s: %w", name, SafePath, exec.ErrNotFound)
}

// Run runs git with args in dir and returns its stdout.
func (r Runner) Run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return r.RunInput(ctx, dir, nil, nil, args...)
}

// RunInput is Run with stdin (nil means empty) and extra environment
// entries ("NAME=value", names from a fixed allowlist of GIT_* variables:
// GIT_INDEX_FILE, GIT_AUTHOR_*, GIT_COMMITTER_*, GIT_DIR, GIT_WORK_TREE,
// GIT_CEILING_DIRECTORIES, pathspec switches, ...).
func (r Runner) RunInput(ctx context.Context, dir string, stdin io.Reader, env []string, args ...string) ([]byte, error) {
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !allowedEnv[name] {
			return nil, &Error{Args: args, ExitCode: -1, Err: fmt.Errorf("%q: %w", name, ErrEnvNotAllowed)}
		}
	}
	bin, err := r.binary()
	if err != nil {
		return nil, &Error{Args: args, ExitCode: -1, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()

	extra := append([]string(nil), env...)
	if needsProbe(args) {
		probe := []string{"config", "--list", "-z"}
		out, err := r.exec(ctx, bin, dir, nil, env, probe)
		if err != nil {
			return nil, err
		}
		extra = append(extra, neutraliseDrivers(out)...)
	}
	return r.exec(ctx, bin, dir, stdin, extra, args)
}

func needsProbe(args []string) bool {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return true
	}
	if args[0] == "worktree" {
		return len(args) < 2 || args[1] != "list"
	}
	return !noProbe[args[0]]
}

func rewrite(args []string) []string {
	if len(args) == 0 || !diffFamily[args[0]] {
		return args
	}
	out := make([]string, 0, len(args)+3)
	out = append(out, args[0], "--no-ext-diff", "--no-textconv", "--no-color")
	return append(out, args[1:]...)
}

// neutraliseDrivers reads `git config --list -z` output and returns
// GIT_CONFIG_COUNT entries that switch off every configured filter driver.
func neutraliseDrivers(list []byte) []string {
	seen := map[string]bool{}
	var names []string
	for _, rec := range bytes.Split(list, []byte{0}) {
		key, _, _ := bytes.Cut(rec, []byte{'\n'})
		k := string(key)
		dot := strings.IndexByte(k, '.')
		last := strings.LastIndexByte(k, '.')
		if dot < 0 || last <= dot || !strings.EqualFold(k[:dot], "filter") {
			continue
		}
		name := k[dot+1 : last]
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	vars := []struct{ key, value string }{
		{"clean", ""}, {"smudge", ""}, {"process", ""}, {"required", "false"},
	}
	env := make([]string, 0, 1+2*len(vars)*len(names))
	n := 0
	for _, name := range names {
		for _, v := range vars {
			env = append(env,
				"GIT_CONFIG_KEY_"+strconv.Itoa(n)+"=filter."+name+"."+v.key,
				"GIT_CONFIG_VALUE_"+strconv.Itoa(n)+"="+v.value)
			n++
		}
	}
	return append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(n))
}

const maxStderr = 64 << 10

func (r Runner) exec(ctx context.Context, bin, dir string, stdin io.Reader, extra, args []string) ([]byte, error) {
	if err := checkReadFiles(dir); err != nil {
		return nil, &Error{Args: args, ExitCode: -1, Err: err}
	}
	ctx, overflow := context.WithCancelCause(ctx)
	defer overflow(nil)

	full := make([]string, 0, len(hardening)+len(args)+3)
	full = append(full, hardening...)
	full = append(full, rewrite(args)...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), baseEnv...), extra...)
	cmd.Stdin = stdin
	stdout := &capWriter{max: r.maxOutput(), full: func() { overflow(ErrOutputTooLarge) }}
	stderr := &capWriter{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The whole group: git's children (filters, helpers) die too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second

	err := cmd.Start()
	if err == nil {
		stop := watchFIFO(cmd.Process.Pid, overflow)
		err = cmd.Wait()
		stop()
	}
	if err == nil && !stdout.over {
		return stdout.buf.Bytes(), nil
	}
	e := &Error{Args: args, ExitCode: -1, Stderr: strings.TrimSpace(stderr.buf.String()), Err: err}
	if stdout.over {
		e.Err = ErrOutputTooLarge
		return nil, e
	}
	if cause := context.Cause(ctx); cause != nil {
		// Killed by us: timeout, caller's cancellation or output cap.
		e.Err = cause
		return nil, e
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.ExitCode = ee.ExitCode()
	}
	return nil, e
}

// capWriter keeps at most max bytes; on overflow it calls full once and
// drops the rest.
type capWriter struct {
	buf  bytes.Buffer
	max  int64
	full func()
	over bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - int64(w.buf.Len())
	if int64(len(p)) > room {
		if room > 0 {
			w.buf.Write(p[:room])
		}
		if !w.over && w.full != nil {
			w.over = true
			w.full()
		}
		return len(p), nil
	}
	return w.buf.Write(p)
}
