package rundir

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// selectCaches lists the root and selects caches the way a plan does.
func selectCaches(t *testing.T, b *Backend) map[string][]string {
	t.Helper()
	ctx := context.Background()
	rts, err := b.List(ctx, backend.ListOptions{Light: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, rt := range rts {
		files, err := b.ReclaimFiles(ctx, rt, backend.FileOptions{Step: backend.StepCaches, CacheDirs: cacheDirs})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(b.Root, f.Path)
			got[rt.ID] = append(got[rt.ID], rel)
		}
	}
	return got
}

var cacheDirs = []string{".cache", ".npm"}

func settleNow(t *testing.T) {
	old := probeSettle
	probeSettle = -time.Hour // every folder counts as settled
	t.Cleanup(func() { probeSettle = old })
}

// TestProbeCacheFindsWhatAppears: a folder remembered as bare that gains a
// home cache or a core dump is read again and its files selected, within
// one process and across processes (a new Backend reading the cache file).
func TestProbeCacheFindsWhatAppears(t *testing.T) {
	settleNow(t)
	root := t.TempDir()
	state := t.TempDir()
	for _, id := range []string{"a", "b", "c", "d"} {
		testtree.Write(t, filepath.Join(root, id, "task.json"), "{}")
	}
	testtree.Write(t, filepath.Join(root, "d", "home", ".npm", "x"), "x")
	b := &Backend{Root: root, Home: "home", ProbeDir: state, CacheDirs: cacheDirs}
	if got := selectCaches(t, b); len(got) != 1 || !slices.Equal(got["d"], []string{"d/home/.npm"}) {
		t.Fatalf("first pass selected %v, want only d/home/.npm", got)
	}
	cache := b.probeCachePath()
	if probes := loadProbes(cache, 2); len(probes) != 3 {
		t.Fatalf("cache holds %d folders, want the 3 bare ones: %v", len(probes), probes)
	}

	// Changes behind the cache's back: a home cache in a, a core dump in b.
	testtree.Write(t, filepath.Join(root, "a", "home", ".cache", "pip", "wheel"), "w")
	testtree.CoreDump(t, filepath.Join(root, "b", "core"))
	for _, fresh := range []bool{false, true} {
		bb := b
		if fresh {
			bb = &Backend{Root: root, Home: "home", ProbeDir: state, CacheDirs: cacheDirs} // another process
		}
		got := selectCaches(t, bb)
		want := map[string][]string{"a": {"a/home/.cache"}, "b": {"b/core"}, "d": {"d/home/.npm"}}
		if len(got) != len(want) {
			t.Fatalf("fresh=%v: selected %v, want %v", fresh, got, want)
		}
		for id, paths := range want {
			if !slices.Equal(got[id], paths) {
				t.Errorf("fresh=%v: %s selected %v, want %v", fresh, id, got[id], paths)
			}
		}
	}
	if probes := loadProbes(cache, 2); len(probes) != 1 {
		t.Errorf("cache holds %v, want only c", probes)
	}
}

// TestProbeCacheHomes: run folders with a home (and workspaces two levels
// down) that hold no cache are remembered too, and a cache or core dump
// appearing inside the home or a workspace, which leaves the run folder's
// own stamp alone, is still found.
func TestProbeCacheHomes(t *testing.T) {
	settleNow(t)
	root, state := t.TempDir(), t.TempDir()
	for _, id := range []string{"a", "b", "c"} {
		testtree.Write(t, filepath.Join(root, id, "home", ".bashrc"), "x")
		testtree.Write(t, filepath.Join(root, id, "home", ".config", "app"), "x")
		testtree.Write(t, filepath.Join(root, id, "src", "ws", "main.go"), "package main")
	}
	mk := func() *Backend {
		return &Backend{Root: root, Home: "home", Workspaces: []string{"src/ws"}, ProbeDir: state, CacheDirs: cacheDirs}
	}
	b := mk()
	if got := selectCaches(t, b); len(got) != 0 {
		t.Fatalf("selected %v from homes without caches", got)
	}
	if probes := loadProbes(b.probeCachePath(), 3); len(probes) != 3 {
		t.Fatalf("cache holds %v, want a, b and c", probes)
	}
	testtree.Write(t, filepath.Join(root, "a", "home", ".npm", "_cacache", "x"), "x")
	testtree.CoreDump(t, filepath.Join(root, "b", "src", "ws", "core.77"))
	for _, bb := range []*Backend{b, mk()} {
		got := selectCaches(t, bb)
		if len(got) != 2 || !slices.Equal(got["a"], []string{"a/home/.npm"}) || !slices.Equal(got["b"], []string{"b/src/ws/core.77"}) {
			t.Errorf("selected %v, want a/home/.npm and b/src/ws/core.77", got)
		}
	}
	// A home replaced by a link to a folder elsewhere holding a cache: the
	// probe does not vouch for it, and the selection does not follow it.
	elsewhere := t.TempDir()
	testtree.Write(t, filepath.Join(elsewhere, ".cache", "big"), "x")
	testtree.CoreDump(t, filepath.Join(elsewhere, "core"))
	if err := os.RemoveAll(filepath.Join(root, "c", "home")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(root, "c", "home")); err != nil {
		t.Fatal(err)
	}
	if got := selectCaches(t, mk()); len(got["c"]) != 0 {
		t.Errorf("looked into a home that is a link: selected %v", got["c"])
	}
}

// TestProbeCacheRecentFolders: a folder changed within probeSettle of the
// read is never remembered (its change could share the read's clock tick).
func TestProbeCacheRecentFolders(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	testtree.Write(t, filepath.Join(root, "new", "task.json"), "{}")
	b := &Backend{Root: root, Home: "home", ProbeDir: state, CacheDirs: cacheDirs}
	selectCaches(t, b)
	if probes := loadProbes(b.probeCachePath(), 2); len(probes) != 0 {
		t.Errorf("a folder changed just now was remembered: %v", probes)
	}
	// Still bare for this pass: selection is free and finds nothing.
	if got := selectCaches(t, b); len(got) != 0 {
		t.Errorf("selected %v", got)
	}
}

// TestProbeCacheDamaged: a cache that is truncated, foreign or unreadable
// is ignored; selection stays right.
func TestProbeCacheDamaged(t *testing.T) {
	settleNow(t)
	root, state := t.TempDir(), t.TempDir()
	testtree.CoreDump(t, filepath.Join(root, "a", "core.123"))
	testtree.Write(t, filepath.Join(root, "b", "notes"), "n")
	b := &Backend{Root: root, Home: "home", ProbeDir: state, CacheDirs: cacheDirs}
	cache := b.probeCachePath()
	for _, content := range []string{probeMagic + "\x05\x00ab", "not a cache", probeMagic + "\x01\x00a\x00\x00"} {
		testtree.Write(t, cache, content)
		got := selectCaches(t, b)
		if len(got) != 1 || !slices.Equal(got["a"], []string{"a/core.123"}) {
			t.Errorf("cache %q: selected %v", content, got)
		}
	}
	// A cache naming a folder that holds a core dump under the stamp it has
	// now cannot happen (adding the file changed the stamp), but a cache
	// from another layout must not apply: the layout is in the file name.
	other := &Backend{Root: root, Home: "elsewhere", ProbeDir: state, CacheDirs: cacheDirs}
	if other.probeCachePath() == cache {
		t.Error("two layouts share a cache file")
	}
	// A cache folder that cannot be made (a file is in the way, which
	// stops root too): the pass goes on and selects the same.
	blocker := filepath.Join(state, "blocker")
	testtree.Write(t, blocker, "")
	if got := selectCaches(t, &Backend{Root: root, Home: "home", ProbeDir: filepath.Join(blocker, "cache"), CacheDirs: cacheDirs}); len(got) != 1 {
		t.Errorf("an unwritable cache folder changed the selection: %v", got)
	}
}

func TestCoreLike(t *testing.T) {
	for name, want := range map[string]bool{"core": true, "core.1": true, "core.12345": true,
		"core.": false, "core.x": false, "cores": false, "core.1a": false, "xcore": false, "": false} {
		if coreLike([]byte(name)) != want {
			t.Errorf("coreLike(%q) = %v", name, !want)
		}
	}
}
