package cli_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

type archiveJSON struct {
	ID       string   `json:"id"`
	Runtime  string   `json:"runtime"`
	Backend  string   `json:"backend"`
	Location string   `json:"location"`
	Formats  []string `json:"formats"`
	Bytes    int64    `json:"bytes"`
	Objects  []struct {
		Name   string `json:"name"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	} `json:"objects"`
	Survives     []string `json:"survives"`
	Dependencies []struct {
		Path      string   `json:"path"`
		LockFiles []string `json:"lock_files"`
	} `json:"dependencies"`
}

// runFolder lays out a run folder that is a git repository with source,
// an executable, a link, an ignored .env and an ignored node_modules with
// its lock file.
func runFolder(t *testing.T, path string) {
	t.Helper()
	write(t, filepath.Join(path, ".gitignore"), "node_modules/\n.env\n")
	write(t, filepath.Join(path, "src", "index.js"), "console.log(1)\n")
	write(t, filepath.Join(path, "package-lock.json"), "{}\n")
	write(t, filepath.Join(path, "node_modules", "left-pad", "index.js"), "module.exports = 1\n")
	write(t, filepath.Join(path, ".env"), "SECRET=1\n")
	write(t, filepath.Join(path, "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(path, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/index.js", filepath.Join(path, "main.js")); err != nil {
		t.Fatal(err)
	}
	git(t, path, "init", "-q", "-b", "main")
}

func s3Config(t *testing.T, dir, endpoint, bucket, runs string) string {
	return config(t, dir, "[archive.s3]\nendpoint = \""+endpoint+"\"\nbucket = \""+bucket+"\"\nprefix = \"agents/host1\"\n"+
		"[[dirs]]\nroot = \""+runs+"\"\n")
}

// TestRunFolderArchiveToS3RoundTrip: deleting a run folder archives it to
// a real S3 server first (dependency folders left out and listed with
// their lock file), archives lists it, restore brings it back byte for
// byte, and prune (dry run first) removes it from the bucket and the
// ledger, journaled.
func TestRunFolderArchiveToS3RoundTrip(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	r1 := filepath.Join(runs, "r1")
	runFolder(t, r1)
	want := dropDeps(testtree.Fingerprint(t, r1))
	cfg := s3Config(t, dir, srv.Endpoint, "archives", runs)

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "delete", "r1")
	if len(res.Results) != 1 || res.Results[0].Outcome != "done" {
		t.Fatalf("delete: %+v", res.Results)
	}
	if exists(r1) {
		t.Fatal("the run folder is still there")
	}
	var list []archiveJSON
	runJSON(t, &list, "--config", cfg, "archives")
	if len(list) != 1 {
		t.Fatalf("archives: %+v", list)
	}
	a := list[0]
	if a.Runtime != "r1" || a.Backend != "dir" || !slices.Equal(a.Formats, []string{"tar.zst"}) || len(a.Objects) != 1 ||
		!strings.HasPrefix(a.Location, "s3://archives/agents/host1/dir/r1/") || !strings.HasSuffix(a.Location, ".manifest.json") {
		t.Fatalf("archive: %+v", a)
	}
	if len(a.Dependencies) != 1 || a.Dependencies[0].Path != "node_modules" || !slices.Equal(a.Dependencies[0].LockFiles, []string{"package-lock.json"}) {
		t.Fatalf("dependencies: %+v", a.Dependencies)
	}
	if !strings.Contains(strings.Join(a.Survives, "; "), "node_modules NOT kept") {
		t.Fatalf("survives: %v", a.Survives)
	}
	stored := srv.ObjectPath("archives", "agents/host1/"+a.Objects[0].Name)
	if fi, err := os.Stat(stored); err != nil || fi.Size() != a.Objects[0].Bytes {
		t.Fatalf("object in the bucket: %v", err)
	}
	detail := runOK(t, "--config", cfg, "archives", a.ID)
	for _, w := range []string{"survives:", "node_modules (not kept; lock files: package-lock.json)", "sha256:" + a.Objects[0].SHA256} {
		if !strings.Contains(detail, w) {
			t.Errorf("archives %s lacks %q:\n%s", a.ID, w, detail)
		}
	}

	runOK(t, "--config", cfg, "restore", "r1")
	if got := dropDeps(testtree.Fingerprint(t, r1)); got != want {
		t.Fatalf("restored run folder differs:\n%s\nwant:\n%s", got, want)
	}
	if exists(filepath.Join(r1, "node_modules")) {
		t.Fatal("node_modules came back although it was not kept")
	}

	dry := runOK(t, "--config", cfg, "archives", "prune", "--older-than", "1ns", "--dry-run")
	if !strings.Contains(dry, a.ID) || !strings.Contains(dry, "would free") {
		t.Fatalf("prune dry run:\n%s", dry)
	}
	if _, err := os.Stat(stored); err != nil {
		t.Fatal("the dry run removed the object")
	}
	out := runOK(t, "--config", cfg, "archives", "prune", "--older-than", "1ns")
	if !strings.Contains(out, "done") {
		t.Fatalf("prune:\n%s", out)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Fatalf("the object is still in the bucket: %v", err)
	}
	if _, err := os.Stat(srv.ObjectPath("archives", strings.TrimPrefix(a.Location, "s3://archives/"))); !os.IsNotExist(err) {
		t.Fatalf("the manifest is still in the bucket: %v", err)
	}
	runJSON(t, &list, "--config", cfg, "archives")
	if len(list) != 0 {
		t.Fatalf("archives after prune: %+v", list)
	}
	if log := runOK(t, "--config", cfg, "log"); !strings.Contains(log, "prune-archive") {
		t.Fatalf("the prune is not journaled:\n%s", log)
	}
	// Pruning again finds nothing.
	if out := runOK(t, "--config", cfg, "archives", "prune", "--older-than", "1ns"); !strings.Contains(out, "nothing to prune") {
		t.Fatalf("second prune:\n%s", out)
	}
}

func dropDeps(fp string) string {
	var out []string
	for _, l := range strings.Split(fp, "\n") {
		if !strings.HasPrefix(l, `"node_modules`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFailedArchiveLeavesRuntime: an unreachable server, a missing bucket
// and an upload cut off in the middle each fail the delete: the run folder
// is untouched, nothing is recorded as archived, and the reason is in the
// result, the journal and a failed notice.
func TestFailedArchiveLeavesRuntime(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "http://" + l.Addr().String()
	}()
	proxy := testtree.StartCutProxy(t, srv.Host)
	proxy.Cut(2 << 20)
	for _, tc := range []struct {
		name, endpoint, bucket, reason string
	}{
		{"unreachable", closed, "archives", "connection refused"},
		{"bucket missing", srv.Endpoint, "nobucket", "the bucket does not exist"},
		{"upload cut off", "http://" + proxy.Host, "archives", "put object s3://archives/agents/host1/dir/r1/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			r1 := filepath.Join(runs, "r1")
			runFolder(t, r1)
			big, err := os.Create(filepath.Join(r1, "results.bin"))
			if err != nil {
				t.Fatal(err)
			}
			io.CopyN(big, rand.Reader, 12<<20) // incompressible: the upload is larger than the cut
			big.Close()
			before := testtree.Fingerprint(t, r1)
			cfg := s3Config(t, dir, tc.endpoint, tc.bucket, runs)

			out, errOut, code := run(t, "--config", cfg, "delete", "r1", "--json")
			if code != 1 || !strings.Contains(out, `"failed"`) || !strings.Contains(out, tc.reason) ||
				!strings.Contains(out, "nothing was removed") {
				t.Fatalf("delete: exit %d\n%s\n%s", code, out, errOut)
			}
			if got := testtree.Fingerprint(t, r1); got != before {
				t.Fatal("the run folder changed")
			}
			var list []archiveJSON
			runJSON(t, &list, "--config", cfg, "archives")
			if len(list) != 0 {
				t.Fatalf("an archive was recorded: %+v", list)
			}
			if log := runOK(t, "--config", cfg, "log"); !strings.Contains(log, "failed") || !strings.Contains(log, tc.reason) {
				t.Fatalf("journal:\n%s", log)
			}
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(dir, "state", "ledger.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			notices, err := st.ListNotices(ctx, ledger.NoticeFilter{Key: ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: "r1"}})
			if err != nil || len(notices) != 1 || notices[0].Kind != "failed" || !strings.Contains(notices[0].Message, tc.reason) {
				t.Fatalf("notices: %+v %v", notices, err)
			}
			// Never marked removed (a delete on request records nothing else).
			if rec, err := st.Runtime(ctx, ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: "r1"}); (err != nil && !errors.Is(err, ledger.ErrNotFound)) ||
				rec.State == "deleted" || rec.State == "archived" {
				t.Fatalf("record: %+v %v", rec, err)
			}
			// Nothing half-uploaded is visible in the bucket.
			if tc.bucket == "archives" {
				n := 0
				filepath.Walk(filepath.Join(srv.Root, "archives"), func(p string, fi os.FileInfo, err error) error {
					if err == nil && !fi.IsDir() && !strings.HasPrefix(fi.Name(), ".") {
						n++
					}
					return nil
				})
				if n != 0 {
					t.Fatalf("%d objects in the bucket", n)
				}
			}
			if tc.name == "upload cut off" && proxy.Cuts() == 0 {
				t.Fatal("the proxy cut no connection")
			}
		})
	}
}

// TestArchiveFolderFull: the local archive folder (a 1 MiB tmpfs) fills up
// while the run folder is archived: the delete fails with the reason, no
// partial file is left, the run folder is untouched.
func TestArchiveFolderFull(t *testing.T) {
	dir := t.TempDir()
	archives := filepath.Join(dir, "archives")
	testtree.MountTmpfs(t, archives, "size=1m")
	runs := filepath.Join(dir, "runs")
	r1 := filepath.Join(runs, "r1")
	runFolder(t, r1)
	big, err := os.Create(filepath.Join(r1, "results.bin"))
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(big, rand.Reader, 3<<20)
	big.Close()
	before := testtree.Fingerprint(t, r1)
	cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\n")
	out, errOut, code := run(t, "--config", cfg, "delete", "r1", "--json")
	if code != 1 || !strings.Contains(out, "no space left on device") || !strings.Contains(out, "nothing was removed") {
		t.Fatalf("delete: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := testtree.Fingerprint(t, r1); got != before {
		t.Fatal("the run folder changed")
	}
	left := 0
	filepath.Walk(archives, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			left++
			t.Logf("left: %s", p)
		}
		return nil
	})
	if left != 0 {
		t.Fatalf("%d files left in the archive folder", left)
	}
}

// TestWorktreeArchiveToS3RoundTrip: deleting a worktree with unsaved work
// stores its bundle and patch in a real S3 bucket; with the branch and
// snapshot ref gone from the repository, restore brings the worktree back
// from the bucket alone, with the same status and files.
func TestWorktreeArchiveToS3RoundTrip(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	dir := t.TempDir()
	repo := newRepo(t, filepath.Join(dir, "repo"))
	wt := filepath.Join(dir, "wt", "feature")
	git(t, repo, "worktree", "add", "-q", "-b", "agent/feature", wt)
	write(t, filepath.Join(wt, "feature.go"), "package main // committed\n")
	git(t, wt, "add", "feature.go")
	git(t, wt, "commit", "-q", "-m", "agent work")
	write(t, filepath.Join(wt, "src", "main.go"), "package main // changed\n")
	write(t, filepath.Join(wt, "notes", "todo.txt"), "untracked\n")
	status := git(t, wt, "status", "--porcelain")
	cfg := config(t, dir, "[archive.s3]\nendpoint = \""+srv.Endpoint+"\"\nbucket = \"archives\"\n[[worktrees]]\nrepo = \""+repo+"\"\n")

	var res applyJSON
	runJSON(t, &res, "--config", cfg, "delete", wt)
	if len(res.Results) != 1 || res.Results[0].Outcome != "done" {
		t.Fatalf("delete: %+v", res.Results)
	}
	var list []archiveJSON
	runJSON(t, &list, "--config", cfg, "archives", "repo:feature")
	if len(list) != 1 || !slices.Equal(list[0].Formats, []string{"git-bundle", "patch"}) ||
		!strings.HasPrefix(list[0].Location, "s3://archives/worktree/repo:feature/") {
		t.Fatalf("archives: %+v", list)
	}
	survives := strings.Join(list[0].Survives, "; ")
	for _, w := range []string{"branch agent/feature with 2 commits not on any remote", "uncommitted changes to 1 file", "1 untracked file"} {
		if !strings.Contains(survives, w) {
			t.Errorf("survives lacks %q: %s", w, survives)
		}
	}
	// Only the bucket has the work now.
	git(t, repo, "branch", "-D", "agent/feature")
	for _, ref := range strings.Fields(git(t, repo, "for-each-ref", "--format=%(refname)", "refs/reclaimer/")) {
		git(t, repo, "update-ref", "-d", ref)
	}
	runOK(t, "--config", cfg, "restore", "repo:feature")
	if got := git(t, wt, "status", "--porcelain"); got != status {
		t.Fatalf("status after restore:\n%s\nwant:\n%s", got, status)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "feature.go")); err != nil || string(b) != "package main // committed\n" {
		t.Fatalf("feature.go: %q %v", b, err)
	}
}
