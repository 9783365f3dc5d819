package gitcmd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

func TestRunReturnsStdoutAndErrors(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	var r gitcmd.Runner
	out, err := r.Run(ctx(t), repo, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if want := git(t, repo, "rev-parse", "HEAD"); string(out) != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}

	_, err = r.Run(ctx(t), repo, "rev-parse", "--verify", "no-such-ref")
	var ge *gitcmd.Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v (%T), want *gitcmd.Error", err, err)
	}
	if ge.ExitCode != 128 {
		t.Errorf("ExitCode = %d, want 128", ge.ExitCode)
	}
	if ge.Stderr != "fatal: Needed a single revision" {
		t.Errorf("Stderr = %q", ge.Stderr)
	}
	if !slices.Equal(ge.Args, []string{"rev-parse", "--verify", "no-such-ref"}) {
		t.Errorf("Args = %q", ge.Args)
	}
	if want := `git "rev-parse" "--verify" "no-such-ref": exit status 128: fatal: Needed a single revision`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestRunMissingBinaryAndDir(t *testing.T) {
	t.Parallel()
	r := gitcmd.Runner{Git: "no-such-git-binary"}
	_, err := r.Run(ctx(t), t.TempDir(), "version")
	var ge *gitcmd.Error
	if !errors.As(err, &ge) || ge.ExitCode != -1 {
		t.Fatalf("err = %v, want *Error with ExitCode -1", err)
	}
	_, err = gitcmd.Runner{}.Run(ctx(t), filepath.Join(t.TempDir(), "gone"), "version")
	if !errors.As(err, &ge) || ge.ExitCode != -1 || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want *Error wrapping ErrNotExist", err)
	}
}

// fakeGit writes a script standing in for git.
func fakeGit(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-git")
	writeExec(t, p, "#!/bin/sh\n"+body)
	return p
}

func TestEnvironmentIsScrubbed(t *testing.T) {
	// Everything a caller's environment could smuggle in.
	other := newRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other, "idx"))
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='/bin/false'")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
	t.Setenv("GIT_CONFIG_VALUE_0", "/bin/false")
	t.Setenv("GIT_EXTERNAL_DIFF", "/bin/false")
	t.Setenv("SECRET_TOKEN", "s3cret")
	t.Setenv("LD_PRELOAD", "/nonexistent.so")

	t.Run("fake", func(t *testing.T) {
		bin := fakeGit(t, `env; printf '%s\n' ARGS "$@"`)
		out, err := gitcmd.Runner{Git: bin}.Run(ctx(t), t.TempDir(), "rev-parse", "--show-toplevel")
		if err != nil {
			t.Fatal(err)
		}
		env, args, _ := strings.Cut(string(out), "ARGS\n")
		got := lines(env)
		slices.Sort(got)
		want := []string{
			"GIT_ATTR_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_NO_REPLACE_OBJECTS=1",
			"GIT_OPTIONAL_LOCKS=0",
			"GIT_PAGER=cat",
			"GIT_PROTOCOL_FROM_USER=0",
			"GIT_TERMINAL_PROMPT=0",
			"HOME=/nonexistent",
			"LANG=C",
			"LC_ALL=C",
			"PATH=" + gitcmd.SafePath,
		}
		// sh itself adds PWD (and may add SHLVL, _ and OLDPWD).
		got = slices.DeleteFunc(got, func(kv string) bool {
			return strings.HasPrefix(kv, "PWD=") || strings.HasPrefix(kv, "SHLVL=") ||
				strings.HasPrefix(kv, "_=") || strings.HasPrefix(kv, "OLDPWD=")
		})
		if !slices.Equal(got, want) {
			t.Errorf("environment:\n got %q\nwant %q", got, want)
		}
		a := lines(args)
		if !slices.Contains(a, "core.fsmonitor=false") || !slices.Contains(a, "core.hooksPath=/dev/null") ||
			!slices.Contains(a, "--no-optional-locks") || !slices.Contains(a, "protocol.allow=never") {
			t.Errorf("hardening missing from argv %q", a)
		}
		if !slices.Equal(a[len(a)-2:], []string{"rev-parse", "--show-toplevel"}) {
			t.Errorf("argv does not end with the caller's args: %q", a)
		}
	})

	t.Run("real", func(t *testing.T) {
		repo := newRepo(t)
		var r gitcmd.Runner
		top, err := r.TopLevel(ctx(t), repo)
		if err != nil {
			t.Fatal(err)
		}
		if top != real(t, repo) {
			t.Errorf("TopLevel = %q, want %q (GIT_DIR/GIT_WORK_TREE leaked)", top, real(t, repo))
		}
		// An extra GIT_DIR passed on purpose does apply.
		out, err := r.RunInput(ctx(t), t.TempDir(), nil,
			[]string{"GIT_DIR=" + filepath.Join(other, ".git")}, "rev-parse", "--absolute-git-dir")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimSuffix(string(out), "\n"), real(t, filepath.Join(other, ".git")); got != want {
			t.Errorf("explicit GIT_DIR: got %q, want %q", got, want)
		}
	})
}

func TestRunInputEnvAllowlist(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	var r gitcmd.Runner
	for _, kv := range []string{"GIT_CONFIG_COUNT=1", "PATH=/tmp", "GIT_EXTERNAL_DIFF=x", "GIT_SSH_COMMAND=x", "GIT_INDEX_FILE"} {
		_, err := r.RunInput(ctx(t), repo, nil, []string{kv}, "status")
		if !errors.Is(err, gitcmd.ErrEnvNotAllowed) {
			t.Errorf("env %q: err = %v, want ErrEnvNotAllowed", kv, err)
		}
	}
	// An allowed variable with stdin: stage README into a fresh index.
	idx := filepath.Join(t.TempDir(), "index")
	env := []string{"GIT_INDEX_FILE=" + idx}
	blob := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD:README"))
	in := strings.NewReader("100644 " + blob + "\tother name\n")
	if _, err := r.RunInput(ctx(t), repo, in, env, "update-index", "--index-info"); err != nil {
		t.Fatal(err)
	}
	out, err := r.RunInput(ctx(t), repo, nil, env, "ls-files", "-z")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "other name\x00" {
		t.Errorf("ls-files on the extra index = %q", out)
	}
	if out, _ := r.Run(ctx(t), repo, "ls-files", "-z"); string(out) != "README\x00" {
		t.Errorf("real index touched: %q", out)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// A "git" that hangs, with a grandchild holding stdout open.
	bin := fakeGit(t, "sleep 300 &\necho $! > '"+pidFile+"'\nwait\n")
	r := gitcmd.Runner{Git: bin, Timeout: time.Second}
	start := time.Now()
	_, err := r.Run(context.Background(), dir, "rev-parse", "HEAD")
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	var ge *gitcmd.Error
	if !errors.As(err, &ge) || ge.ExitCode != -1 {
		t.Errorf("err = %#v, want *Error with ExitCode -1", err)
	}
	if elapsed > 10*time.Second {
		t.Errorf("Run returned after %v", elapsed)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !waitGone(pid, 10*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("grandchild %d survived the timeout", pid)
	}
}

// waitGone polls until pid no longer runs (gone, or a zombie nobody has
// reaped yet). The signal is asynchronous, so a short poll is needed.
func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestCancelStopsRun(t *testing.T) {
	t.Parallel()
	bin := fakeGit(t, "exec sleep 300\n")
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := gitcmd.Runner{Git: bin}.Run(c, t.TempDir(), "rev-parse")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	_, err := gitcmd.Runner{MaxOutput: 10}.Run(ctx(t), repo, "rev-parse", "HEAD")
	if !errors.Is(err, gitcmd.ErrOutputTooLarge) {
		t.Fatalf("err = %v, want ErrOutputTooLarge", err)
	}
	out, err := gitcmd.Runner{MaxOutput: 41}.Run(ctx(t), repo, "rev-parse", "HEAD")
	if err != nil || len(out) != 41 {
		t.Fatalf("exactly at the cap: %q, %v", out, err)
	}
}

func TestTopLevelGitDirCommonDirIsRepo(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, repo, "worktree", "add", "-q", "-b", "feature", wt)
	sub := filepath.Join(repo, "sub")
	write(t, filepath.Join(sub, "f"), "x")
	plain := t.TempDir()
	var r gitcmd.Runner
	c := ctx(t)

	for _, tc := range []struct {
		dir, top, gitDir, common string
	}{
		{repo, real(t, repo), real(t, repo) + "/.git", real(t, repo) + "/.git"},
		{sub, real(t, repo), real(t, repo) + "/.git", real(t, repo) + "/.git"},
		{wt, real(t, wt), real(t, repo) + "/.git/worktrees/wt", real(t, repo) + "/.git"},
	} {
		if got, err := r.TopLevel(c, tc.dir); err != nil || got != tc.top {
			t.Errorf("TopLevel(%s) = %q, %v; want %q", tc.dir, got, err, tc.top)
		}
		if got, err := r.GitDir(c, tc.dir); err != nil || got != tc.gitDir {
			t.Errorf("GitDir(%s) = %q, %v; want %q", tc.dir, got, err, tc.gitDir)
		}
		if got, err := r.CommonDir(c, tc.dir); err != nil || got != tc.common {
			t.Errorf("CommonDir(%s) = %q, %v; want %q", tc.dir, got, err, tc.common)
		}
	}
	if got, err := r.GitPath(c, wt, "info/exclude"); err != nil || got != real(t, repo)+"/.git/info/exclude" {
		t.Errorf("GitPath(wt, info/exclude) = %q, %v", got, err)
	}
	if _, err := r.TopLevel(c, plain); err == nil {
		t.Errorf("TopLevel of a plain folder succeeded")
	}

	// A repository whose config moves the work tree elsewhere.
	moved := newRepo(t)
	git(t, moved, "config", "core.worktree", plain)

	for dir, want := range map[string]bool{repo: true, wt: true, sub: false, plain: false, moved: false} {
		if got := r.IsRepo(c, dir); got != want {
			t.Errorf("IsRepo(%s) = %v, want %v", dir, got, want)
		}
	}
}

func TestForeignOwnedRepository(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	repo := newRepo(t)
	err := filepath.Walk(repo, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 12345, 12345)
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := gitErr(t, repo, "status"); err == nil || !strings.Contains(out, "dubious ownership") {
		t.Fatalf("plain git on a foreign repository: %v %s", err, out)
	}
	var r gitcmd.Runner
	if !r.IsRepo(ctx(t), repo) {
		t.Errorf("IsRepo of a foreign-owned repository = false")
	}
	if _, err := r.StatusPorcelainV2(ctx(t), repo, true); err != nil {
		t.Errorf("status of a foreign-owned repository: %v", err)
	}
}
