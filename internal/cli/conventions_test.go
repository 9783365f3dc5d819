package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/cli"
	rconfig "github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var commandNames = []string{"plan", "apply", "ls", "status", "touch", "pin", "unpin", "lease", "retention", "delete",
	"restore", "archives", "log", "size", "usage", "native", "serve", "version"}

// TestHelpOnStdout: --help, -h and help print the commands on standard
// output and exit 0; "CMD --help" and "help CMD" print that command's
// line, summary and only its own flags (double-dash), and exit 0.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "commands:") {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, name := range commandNames {
			if !strings.Contains(out, "\n  "+name) {
				t.Errorf("%v does not list %s", args, name)
			}
		}
	}
	own := map[string][]string{
		"touch": nil, "pin": {"--reason"}, "lease": {"--for"}, "retention": {"--days", "--default"},
		"plan": {"--json", "--out", "--runtime", "--step"}, "ls": {"--json", "-o", "--backend", "--state"},
	}
	foreign := []string{"--days", "--for", "--reason", "--default", "--out"}
	for _, name := range commandNames {
		for _, args := range [][]string{{name, "--help"}, {"help", name}} {
			out, errOut, code := run(t, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: reclaimer "+name) {
				t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
			}
			if strings.Contains(out, "flag: help requested") || strings.Contains(out, " -json") {
				t.Errorf("%v prints flag's own usage:\n%s", args, out)
			}
			if flags, ok := own[name]; ok {
				for _, f := range flags {
					if !strings.Contains(out, f) {
						t.Errorf("%s --help lacks %s:\n%s", name, f, out)
					}
				}
				for _, f := range foreign {
					if !slices.Contains(flags, f) && strings.Contains(out, "  "+f+" ") {
						t.Errorf("%s --help lists %s, which is not its flag:\n%s", name, f, out)
					}
				}
			}
		}
	}
	if _, errOut, code := run(t, "touch", "r1", "--for", "2h"); code != 2 || !strings.Contains(errOut, "-for") {
		t.Fatalf("touch --for: exit %d %q, want a usage error", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "reclaimer ") {
			t.Fatalf("%v: exit %d %q %q", args, code, out, errOut)
		}
	}
	var out, errb strings.Builder
	if code := cli.Run(context.Background(), []string{"version"}, cli.Env{Stdout: &out, Stderr: &errb, Version: "v1.2.3"}); code != 0 ||
		!strings.HasPrefix(out.String(), "reclaimer v1.2.3") {
		t.Fatalf("a set version: %d %q", code, out.String())
	}
}

// TestLoudWhenBlind: a source that cannot be read is a problem with its
// plain cause, named as written, on standard error once, in the JSON, and
// exit 1; no source at all is exit 2.
func TestLoudWhenBlind(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "no", "such", "repo")
	cfg := config(t, dir, "[[worktrees]]\nrepo = \""+repo+"\"\n")
	for _, cmd := range []string{"plan", "apply", "ls", "status"} {
		out, errOut, code := run(t, "--config", cfg, cmd)
		want := `problem: [[worktrees]] repo = "` + repo + `": repository ` + repo + ` does not exist`
		if code != 1 || strings.Count(errOut, "problem:") != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("%s: exit %d\nstdout %s\nstderr %s\nwant %s", cmd, code, out, errOut, want)
		}
		if strings.Count(errOut, repo) != 2 {
			t.Errorf("%s: the cause repeats its prefix: %s", cmd, errOut)
		}
		out, _, code = run(t, "--config", cfg, cmd, "--json")
		var v struct {
			Problems []struct{ Code, Label, Message string } `json:"problems"`
		}
		if cmd == "ls" {
			// ls --json is the list of runtimes; its problems are on stderr.
			continue
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != 1 || len(v.Problems) != 1 ||
			v.Problems[0].Code != "source_unreadable" || v.Problems[0].Message != "repository "+repo+" does not exist" {
			t.Fatalf("%s --json: exit %d %v\n%s", cmd, code, err, out)
		}
	}
	noSource := config(t, filepath.Join(dir, "empty"), "")
	for _, cmd := range []string{"plan", "apply", "status"} {
		if _, errOut, code := run(t, "--config", noSource, cmd); code != 2 || !strings.Contains(errOut, "no source is configured") {
			t.Fatalf("%s without a source: exit %d %q", cmd, code, errOut)
		}
	}
	// A run folder root that does not exist.
	roots := config(t, filepath.Join(dir, "d"), "[[dirs]]\nroot = \""+filepath.Join(dir, "gone")+"\"\n")
	if _, errOut, code := run(t, "--config", roots, "plan"); code != 1 || !strings.Contains(errOut, "folder "+filepath.Join(dir, "gone")+" does not exist") {
		t.Fatalf("missing root: exit %d %q", code, errOut)
	}
}

// TestAllOrNoneAndFlagsAnywhere: pin A B with B unknown pins neither;
// flags may stand before, between and after the IDs; an ID may be a
// relative path.
func TestAllOrNoneAndFlagsAnywhere(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, r := range []string{"a", "b"} {
		write(t, filepath.Join(runs, r, "f"), "x")
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	if _, errOut, code := run(t, "pin", "a", "--config", cfg, "nope", "--reason", "x"); code != 1 || !strings.Contains(errOut, `"nope"`) {
		t.Fatalf("pin a nope: exit %d %q", code, errOut)
	}
	var rows []struct {
		ID     string `json:"id"`
		Pinned bool   `json:"pinned"`
		Reason string `json:"pin_reason"`
	}
	runJSON(t, &rows, "ls", "--config", cfg)
	for _, r := range rows {
		if r.Pinned {
			t.Fatalf("%s was pinned although another name matched nothing", r.ID)
		}
	}
	t.Chdir(runs)
	out := runOK(t, "pin", "./a", "--reason", "demo", "--config", cfg, "b")
	if strings.Count(out, ": pinned:") != 2 {
		t.Fatalf("pin ./a b: %s", out)
	}
	runJSON(t, &rows, "--config", cfg, "ls")
	for _, r := range rows {
		if !r.Pinned || r.Reason != "demo" {
			t.Fatalf("after pin ./a b: %+v", rows)
		}
	}
}

// TestFormerPathAndDeleteSaysWhatWasKept: a runtime deleted (archived
// first: it holds work) is found again by its former path, by archives
// and restore; delete says which archive it wrote and what it left out.
func TestFormerPathAndDeleteSaysWhatWasKept(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	r1 := filepath.Join(runs, "r1")
	write(t, filepath.Join(r1, "notes.md"), "my notes")
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	out := runOK(t, "--config", cfg, "delete", r1)
	if !strings.Contains(out, "archived as ") || !strings.Contains(out, "kept: ") {
		t.Fatalf("delete does not say what it kept:\n%s", out)
	}
	if exists(r1) {
		t.Fatal("r1 is still there")
	}
	if out := runOK(t, "--config", cfg, "archives", r1); !strings.Contains(out, "dir/r1") {
		t.Fatalf("archives by former path:\n%s", out)
	}
	if out := runOK(t, "--config", cfg, "restore", r1); !strings.Contains(out, "restored dir/r1") || !exists(filepath.Join(r1, "notes.md")) {
		t.Fatalf("restore by former path: %s", out)
	}
}

// TestStatusPerFilesystem: status shows each managed filesystem's use,
// free space, watermarks and what is reclaimable there now.
func TestStatusPerFilesystem(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "r1", "home", ".cache", "blob"), strings.Repeat("c", 64<<10))
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\ndisk_high = 0.99\n")
	out := runOK(t, "--config", cfg, "status")
	if !strings.Contains(out, "FILESYSTEM") || !strings.Contains(out, runs) || !strings.Contains(out, "99%") ||
		!strings.Contains(out, "caches ") || !strings.Contains(out, "source [[dirs]] root") {
		t.Fatalf("status:\n%s", out)
	}
	var st struct {
		Filesystems []struct {
			Path             string `json:"path"`
			TotalBytes       int64  `json:"total_bytes"`
			ReclaimableBytes int64  `json:"reclaimable_bytes"`
			Runtimes         int    `json:"runtimes"`
		} `json:"filesystems"`
	}
	runJSON(t, &st, "--config", cfg, "status")
	if len(st.Filesystems) != 1 || st.Filesystems[0].TotalBytes <= 0 || st.Filesystems[0].ReclaimableBytes < 64<<10 || st.Filesystems[0].Runtimes != 1 {
		t.Fatalf("status --json: %+v", st)
	}
}

// TestDryRunWritesOnlyWhatItSays: plan writes the ledger's record of what
// it saw (the ledger file, its lock files, the run folders' probe cache)
// and nothing else: no trash folder, no archive folder, nothing in a run
// folder.
func TestDryRunWritesOnlyWhatItSays(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	write(t, filepath.Join(runs, "r1", "home", ".cache", "blob"), "c")
	before := testtree.Fingerprint(t, runs)
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nhome = \"home\"\n")
	runOK(t, "--config", cfg, "plan")
	runOK(t, "--config", cfg, "status")
	if testtree.Fingerprint(t, runs) != before {
		t.Fatal("a dry run changed the run folders")
	}
	var written []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err == nil && !d.IsDir() && !strings.HasPrefix(rel, "runs/") && rel != "reclaimer.toml" {
			written = append(written, rel)
		}
		return nil
	})
	for _, w := range written {
		ok := w == "state/ledger.db" || w == "state/ledger.db-wal" || w == "state/ledger.db-shm" ||
			strings.HasPrefix(w, "state/locks/") || strings.HasPrefix(w, "state/cache/rundir-")
		if !ok {
			t.Errorf("a dry run wrote %s, which docs/cli.md does not say", w)
		}
	}
	if exists(filepath.Join(dir, "archives")) {
		t.Error("a dry run made the archive folder")
	}
}

// TestInterruptedPlanReturnsAnError: a plan interrupted (the operator's
// Ctrl-C, a SIGTERM) ends with an error and exit 1, promptly, with nothing
// printed as a plan and no panic: the error of planning is not lost on the
// way (it once was, and plan and apply then crashed on a nil plan). The
// interruption comes before the run and in its midst, while git runs.
func TestInterruptedPlanReturnsAnError(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	for i := range 20 {
		git(t, repo, "worktree", "add", "-q", "-b", "wt"+strconv.Itoa(i), filepath.Join(dir, "wt"+strconv.Itoa(i)))
	}
	cfg := config(t, dir, "[[worktrees]]\nrepo = \""+repo+"\"\n")
	for _, after := range []time.Duration{0, 5 * time.Millisecond} {
		for _, cmd := range []string{"plan", "apply"} {
			ctx, cancel := context.WithCancel(context.Background())
			if after == 0 {
				cancel()
			} else {
				stop := time.AfterFunc(after, cancel)
				defer stop.Stop()
			}
			var out, errb strings.Builder
			start := time.Now()
			code := cli.Run(ctx, []string{"--config", cfg, cmd}, cli.Env{Stdout: &out, Stderr: &errb})
			cancel()
			if code == 0 && after > 0 {
				continue // it finished before the interruption: nothing to check
			}
			if code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "canceled") {
				t.Fatalf("%s interrupted after %s: exit %d\nstdout %q\nstderr %q", cmd, after, code, out.String(), errb.String())
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("the interrupted %s took %s", cmd, took)
			}
		}
	}
}

// TestAdHocRunLeavesOtherSourcesAlone: a run with --dir shares the default
// ledger with a file's sources; it does not mark their runtimes missing,
// and its own source is named as the file's table would be.
func TestAdHocRunLeavesOtherSourcesAlone(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Cleanup(rconfig.SetEUIDForTest(1000))
	state := filepath.Join(xdg, "reclaimer")
	filed, other := filepath.Join(dir, "filed"), filepath.Join(dir, "other")
	write(t, filepath.Join(filed, "r1", "f"), "x")
	write(t, filepath.Join(other, "o1", "f"), "x")
	cfg := filepath.Join(dir, "reclaimer.toml")
	write(t, cfg, "[ledger]\npath = \""+filepath.Join(state, "ledger.db")+"\"\n[archive]\ndir = \""+filepath.Join(state, "archives")+
		"\"\n[[dirs]]\nroot = \""+filed+"\"\n")
	runOK(t, "apply", "--config", cfg)
	runOK(t, "apply", "--dir", other)
	runOK(t, "ls", "--dir", other)
	var rows []struct {
		ID     string `json:"id"`
		Source string `json:"source"`
		State  string `json:"state"`
	}
	runJSON(t, &rows, "ls", "--config", cfg)
	if len(rows) != 1 || rows[0].ID != "r1" || rows[0].State == "missing" {
		t.Fatalf("after an ad-hoc run, the file's runtimes are %+v", rows)
	}
	rows = nil
	runJSON(t, &rows, "ls", "--dir", other)
	if len(rows) != 1 || rows[0].ID != "o1" || rows[0].Source != "dirs:"+other {
		t.Fatalf("the ad-hoc run's runtimes are %+v", rows)
	}
}

// TestProgressOfOneBigDelete: on a terminal, deleting one runtime shows
// how its archive and its removal go (bytes stored; entries and bytes
// freed), not just the count of actions.
func TestProgressOfOneBigDelete(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	noise := make([]byte, 96<<10)
	for i := range noise {
		noise[i] = byte(i*7919 + i/13)
	}
	write(t, filepath.Join(runs, "big", "blob"), string(noise))
	for i := range deletion.ProgressEvery + 10 {
		write(t, filepath.Join(runs, "big", "files", strconv.Itoa(i/100), strconv.Itoa(i)), "x")
	}
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	var out, errb strings.Builder
	code := cli.Run(context.Background(), []string{"--config", cfg, "delete", "big"},
		cli.Env{Stdout: &out, Stderr: &errb, IsTerminal: true, Version: "test"})
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"archive of dir/big: ", " stored", "removing: 4096 entries, ", " freed"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("the progress line lacks %q: %q", want, errb.String())
		}
	}
	if !strings.HasSuffix(errb.String(), "\n") {
		t.Error("the progress line is not ended")
	}
}

// TestServeTokenFileMissing: an explicit token_file that does not exist
// (or is too short) is the configuration's problem: exit 2, naming the
// key and saying how to make one, before anything listens.
func TestServeTokenFileMissing(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "no", "api.token")
	short := filepath.Join(dir, "short.token")
	write(t, short, "abc\n")
	for _, c := range []struct{ file, want string }{
		{tok, tok + " does not exist; make one with `(umask 077; head -c 32 /dev/urandom | base64 > " + tok + ")`"},
		{short, short + " holds a token shorter than 16 characters; make one with"},
	} {
		cfg := config(t, dir, "[server]\nlisten = \"127.0.0.1:0\"\ntoken_file = \""+c.file+"\"\n")
		_, errOut, code := run(t, "--config", cfg, "serve")
		if code != 2 || !strings.Contains(errOut, "server.token_file: "+c.want) {
			t.Fatalf("serve with token_file %s: exit %d\n%s", c.file, code, errOut)
		}
	}
}
