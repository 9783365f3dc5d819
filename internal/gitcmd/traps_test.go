package gitcmd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// trapRepo is a repository whose config, hooks and attributes try to run a
// program at every opportunity; each program leaves a marker file in
// marks. The traps are set after the commit, so the committed blobs are
// the raw file contents.
func trapRepo(t *testing.T) (repo, marks string) {
	t.Helper()
	repo = newRepo(t)
	marks = t.TempDir()
	bin := t.TempDir()
	trap := filepath.Join(bin, "trap.sh")
	// trap.sh NAME [pass [args]]: leave a marker; with "pass", act as cat.
	writeExec(t, trap, "#!/bin/sh\ntouch '"+marks+"'/\"$1\"\nif [ \"$2\" = pass ]; then shift 2; exec cat \"$@\"; fi\nexit 0\n")

	write(t, filepath.Join(repo, "f.txt"), "text\n")
	write(t, filepath.Join(repo, "p.dat"), "data\n")
	write(t, filepath.Join(repo, "w.w"), "weird\n")
	write(t, filepath.Join(repo, ".gitattributes"),
		"*.txt filter=evil diff=conv\n*.dat filter=evilp\n*.w filter=we=ird.x\n")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "files")

	for _, kv := range [][2]string{
		{"filter.evil.clean", trap + " clean pass"},
		{"filter.evil.smudge", trap + " smudge pass"},
		{"filter.evil.required", "true"},
		{"filter.evilp.process", trap + " process"},
		{"filter.we=ird.x.clean", trap + " weird-clean pass"},
		{"diff.external", trap + " external"},
		{"diff.conv.textconv", trap + " textconv pass"},
		{"core.fsmonitor", trap + " fsmonitor"},
		{"core.hooksPath", filepath.Join(bin, "hooks")},
		{"core.sshCommand", trap + " ssh"},
		{"credential.helper", "!" + trap + " credential"},
		{"gpg.program", filepath.Join(bin, "gpg")}, // run as a path, not through the shell
		{"commit.gpgSign", "true"},
		{"core.pager", trap + " pager"},
		{"include.path", filepath.Join(bin, "included")},
	} {
		git(t, repo, "config", kv[0], kv[1])
	}
	writeExec(t, filepath.Join(bin, "gpg"), "#!/bin/sh\ntouch '"+marks+"/gpg'\nexit 1\n")
	// A driver that exists only in an included file.
	write(t, filepath.Join(bin, "included"), "[filter \"inc\"]\n\tclean = "+trap+" included-clean pass\n")
	write(t, filepath.Join(repo, ".git", "info", "attributes"), "README filter=inc\n")
	for _, dir := range []string{filepath.Join(repo, ".git", "hooks"), filepath.Join(bin, "hooks")} {
		for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-checkout", "post-index-change"} {
			writeExec(t, filepath.Join(dir, h), "#!/bin/sh\ntouch '"+marks+"/hook-"+h+"'\n")
		}
	}
	return repo, marks
}

// staleStat makes every tracked file's stat data disagree with the index
// (same size, other mtime), so git must hash them: that is when clean
// filters run.
func staleStat(t *testing.T, repo string, daysAgo int) {
	t.Helper()
	when := time.Now().Add(-time.Duration(daysAgo) * 24 * time.Hour)
	for _, f := range []string{"f.txt", "p.dat", "w.w", "README"} {
		if err := os.Chtimes(filepath.Join(repo, f), when, when); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTrapsNeverRun(t *testing.T) {
	t.Parallel()
	repo, marks := trapRepo(t)
	var r gitcmd.Runner
	c := ctx(t)

	// status hashes stat-dirty files: clean filters, fsmonitor.
	staleStat(t, repo, 2)
	es, err := r.StatusPorcelainV2(c, repo, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 0 {
		t.Errorf("status = %+v, want clean (raw contents equal the committed blobs)", es)
	}

	// add into a separate index: clean filters on every file.
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	if _, err := r.RunInput(c, repo, nil, idx, "read-tree", "HEAD"); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "f.txt"), "text changed\n")
	if _, err := r.RunInput(c, repo, nil, idx, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	out, err := r.RunInput(c, repo, nil, idx, "ls-files", "-s", "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.Fields(string(out))[1]
	if got := git(t, repo, "cat-file", "blob", blob); got != "text changed\n" {
		t.Errorf("added blob = %q, want the raw content", got)
	}

	// diff family: external diff and textconv.
	for _, args := range [][]string{{"diff"}, {"diff", "HEAD"}, {"log", "-p", "-1"}, {"show", "HEAD"}} {
		if _, err := r.Run(c, repo, args...); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	out, err = r.Run(c, repo, "diff")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "-text\n+text changed\n") {
		t.Errorf("diff = %q, want the raw change", out)
	}

	// commit: hooks, gpg signing, fsmonitor.
	author := []string{"GIT_AUTHOR_NAME=R", "GIT_AUTHOR_EMAIL=r@example.com", "GIT_COMMITTER_NAME=R", "GIT_COMMITTER_EMAIL=r@example.com"}
	if _, err := r.RunInput(c, repo, nil, author, "commit", "-q", "-a", "-m", "change"); err != nil {
		t.Fatal(err)
	}
	// checkout: smudge filters, post-checkout hook.
	if err := os.Remove(filepath.Join(repo, "f.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(c, repo, "checkout", "--", "f.txt"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "f.txt")); err != nil || string(b) != "text changed\n" {
		t.Errorf("checked out %q, %v", b, err)
	}

	if m := markers(t, marks); len(m) != 0 {
		t.Fatalf("hardened git ran traps: %q", m)
	}

	// Positive control: the same repository under plain git does run them,
	// so the test above proves something.
	staleStat(t, repo, 3)
	gitErr(t, repo, "status") // dies at the process filter, which is no real filter
	// The rest with that filter off, so git gets on to the other traps.
	noProc := []string{"-c", "filter.evilp.process="}
	staleStat(t, repo, 4)
	gitErr(t, repo, append(noProc, "status")...)
	write(t, filepath.Join(repo, "f.txt"), "again\n")
	gitErr(t, repo, append(noProc, "diff")...)
	gitErr(t, repo, append(noProc, "diff", "--no-ext-diff")...)
	gitErr(t, repo, append(noProc, "-c", "commit.gpgSign=false", "commit", "-q", "-a", "-m", "control")...)
	gitErr(t, repo, append(noProc, "commit", "-q", "--allow-empty", "-m", "signed")...)
	got := markers(t, marks)
	for _, want := range []string{"clean", "process", "weird-clean", "included-clean", "fsmonitor", "external", "textconv", "hook-pre-commit", "gpg"} {
		if !slices.Contains(got, want) {
			t.Errorf("control: trap %q did not fire under plain git (markers %q); the test is not armed", want, got)
		}
	}
}

func TestDriverNamesFromConfigProbe(t *testing.T) {
	t.Parallel()
	// A fake git answers the config probe with drivers; the second call
	// shows the environment it got.
	bin := fakeGit(t, `if [ "$(eval echo \${$#})" = -z ]; then
printf 'core.bare\nfalse\000filter.a=b c.d.clean\nx\000FILTER.Up.Smudge\ny\000diff.x.textconv\nz\000filter.noval\000'
exit 0
fi
env | grep '^GIT_CONFIG_' | sort
`)
	out, err := gitcmd.Runner{Git: bin}.Run(ctx(t), t.TempDir(), "status")
	if err != nil {
		t.Fatal(err)
	}
	got := lines(string(out))
	want := []string{"GIT_CONFIG_COUNT=8"}
	n := 0
	for _, name := range []string{"a=b c.d", "Up"} {
		for _, kv := range [][2]string{{"clean", ""}, {"smudge", ""}, {"process", ""}, {"required", "false"}} {
			i := string(rune('0' + n))
			want = append(want, "GIT_CONFIG_KEY_"+i+"=filter."+name+"."+kv[0], "GIT_CONFIG_VALUE_"+i+"="+kv[1])
			n++
		}
	}
	want = append(want, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("env:\n got %q\nwant %q", got, want)
	}

	// Read-only plumbing is not probed.
	out, err = gitcmd.Runner{Git: bin}.Run(ctx(t), t.TempDir(), "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(string(out)); !slices.Equal(got, []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}) {
		t.Errorf("rev-parse env = %q", got)
	}
}
