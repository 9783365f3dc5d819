package gitcmd_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

func TestWorktrees(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	head := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))
	base := real(t, t.TempDir())
	odd := filepath.Join(base, "wt one\nsecond line \xff")
	git(t, repo, "worktree", "add", "-q", "-b", "feat", odd)
	git(t, repo, "worktree", "lock", "--reason", "on usb\ndrive", odd)
	det := filepath.Join(base, "detached")
	git(t, repo, "worktree", "add", "-q", "--detach", det)
	git(t, repo, "worktree", "lock", det)
	gone := filepath.Join(base, "gone")
	git(t, repo, "worktree", "add", "-q", "-b", "gone", gone)
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}

	var r gitcmd.Runner
	got, err := r.Worktrees(ctx(t), repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []gitcmd.Worktree{
		{Path: real(t, repo), HEAD: head, Branch: "refs/heads/main"},
		{Path: det, HEAD: head, Detached: true, Locked: true},
		{Path: gone, HEAD: head, Branch: "refs/heads/gone", Prunable: true,
			PrunableReason: "gitdir file points to non-existent location"},
		{Path: odd, HEAD: head, Branch: "refs/heads/feat", Locked: true, LockReason: "on usb\ndrive"},
	}
	if len(got) == 0 || got[0].Path != want[0].Path {
		t.Fatalf("main worktree not first: %+v", got)
	}
	sortWT := func(w []gitcmd.Worktree) {
		slices.SortFunc(w[1:], func(a, b gitcmd.Worktree) int { return strings.Compare(a.Path, b.Path) })
	}
	sortWT(got)
	sortWT(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Worktrees:\n got %+v\nwant %+v", got, want)
	}

	// The same list seen from a linked worktree.
	fromLinked, err := r.Worktrees(ctx(t), det)
	if err != nil {
		t.Fatal(err)
	}
	sortWT(fromLinked)
	if !reflect.DeepEqual(fromLinked, want) {
		t.Errorf("Worktrees from a linked worktree:\n got %+v\nwant %+v", fromLinked, want)
	}

	bare := filepath.Join(base, "bare.git")
	git(t, base, "clone", "-q", "--bare", repo, bare)
	got, err = r.Worktrees(ctx(t), bare)
	if err != nil {
		t.Fatal(err)
	}
	if want := []gitcmd.Worktree{{Path: bare, Bare: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("bare: got %+v, want %+v", got, want)
	}
}

func TestParseWorktrees(t *testing.T) {
	t.Parallel()
	got, err := gitcmd.ParseWorktrees([]byte("worktree /b.git\x00bare\x00\x00worktree /w\x00HEAD 0123\x00detached\x00prunable\x00future thing\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := []gitcmd.Worktree{{Path: "/b.git", Bare: true}, {Path: "/w", HEAD: "0123", Detached: true, Prunable: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := gitcmd.ParseWorktrees(nil); err != nil || got != nil {
		t.Errorf("empty: %+v, %v", got, err)
	}
	if _, err := gitcmd.ParseWorktrees([]byte("HEAD 0123\x00")); err == nil {
		t.Errorf("attribute before worktree line accepted")
	}
}

func TestStatusPorcelainV2(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	for name, content := range map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "conflict.txt": "base\n",
		".gitignore": "*.log\nnode_modules/\n",
	} {
		write(t, filepath.Join(repo, name), content)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "files")
	git(t, repo, "checkout", "-q", "-b", "other")
	write(t, filepath.Join(repo, "conflict.txt"), "other\n")
	git(t, repo, "commit", "-q", "-am", "other")
	git(t, repo, "checkout", "-q", "main")
	write(t, filepath.Join(repo, "conflict.txt"), "main\n")
	git(t, repo, "commit", "-q", "-am", "main")
	if _, err := gitErr(t, repo, "merge", "-q", "other"); err == nil {
		t.Fatal("merge did not conflict")
	}

	write(t, filepath.Join(repo, "a.txt"), "a changed\n")           // .M
	write(t, filepath.Join(repo, "n.txt"), "new\n")                 // A.
	git(t, repo, "add", "n.txt")                                    //
	git(t, repo, "mv", "b.txt", "b renamed\n.txt")                  // R.
	if err := os.Remove(filepath.Join(repo, "c.txt")); err != nil { // .D
		t.Fatal(err)
	}
	for _, name := range []string{"new\nline.txt", "sp ace.txt", "bad\xff.txt", "ud/deep/x", "debug.log", "node_modules/pkg/i.js", "ud/node_modules/m"} {
		write(t, filepath.Join(repo, name), "x\n")
	}

	var r gitcmd.Runner
	got, err := r.StatusPorcelainV2(ctx(t), repo, true)
	if err != nil {
		t.Fatal(err)
	}
	// git lists ordinary and renamed entries, then unmerged, untracked, ignored.
	want := []gitcmd.StatusEntry{
		{Kind: gitcmd.Changed, XY: ".M", Sub: "N...", Path: "a.txt"},
		{Kind: gitcmd.Renamed, XY: "R.", Sub: "N...", Score: "R100", Path: "b renamed\n.txt", OrigPath: "b.txt"},
		{Kind: gitcmd.Changed, XY: ".D", Sub: "N...", Path: "c.txt"},
		{Kind: gitcmd.Changed, XY: "A.", Sub: "N...", Path: "n.txt"},
		{Kind: gitcmd.Unmerged, XY: "UU", Sub: "N...", Path: "conflict.txt"},
		{Kind: gitcmd.Untracked, Path: "bad\xff.txt"},
		{Kind: gitcmd.Untracked, Path: "new\nline.txt"},
		{Kind: gitcmd.Untracked, Path: "sp ace.txt"},
		{Kind: gitcmd.Untracked, Path: "ud/deep/x"},
		{Kind: gitcmd.Ignored, Path: "debug.log"},
		{Kind: gitcmd.Ignored, Path: "node_modules/"},
		{Kind: gitcmd.Ignored, Path: "ud/node_modules/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status:\n got %+v\nwant %+v", got, want)
	}
	for _, e := range got {
		if e.IsDir() != strings.HasSuffix(e.Path, "/") {
			t.Errorf("IsDir(%q) = %v", e.Path, e.IsDir())
		}
	}

	got, err = r.StatusPorcelainV2(ctx(t), repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[:9]) {
		t.Errorf("status without ignored:\n got %+v\nwant %+v", got, want[:9])
	}
}

func TestParseStatusV2(t *testing.T) {
	t.Parallel()
	got, err := gitcmd.ParseStatusV2([]byte("# branch.oid 0123\x00? a b\x00! d/\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := []gitcmd.StatusEntry{{Kind: gitcmd.Untracked, Path: "a b"}, {Kind: gitcmd.Ignored, Path: "d/"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"1 .M N... 100644 100644 100644 0123\x00",         // too few fields
		"2 R. N... 100644 100644 100644 01 01 R100 x\x00", // no original path
		"x what\x00",
		"?\x00",
		"? \x00",
	} {
		if _, err := gitcmd.ParseStatusV2([]byte(bad)); err == nil {
			t.Errorf("ParseStatusV2(%q) accepted", bad)
		}
	}
	if got := gitcmd.Kind('?').String(); got != "untracked" {
		t.Errorf("Kind.String = %q", got)
	}
}
