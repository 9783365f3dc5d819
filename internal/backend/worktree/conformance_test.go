package worktree_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

var local = []string{"Lister", "Deleter", "FileReclaimer", "Exporter", "Restorer"}

// TestConformance runs the suite over the linked worktrees of one
// repository (repo = ...) and over those below a folder (root = ...).
// Outside: a worktree of another repository; one outside the root.
func TestConformance(t *testing.T) {
	t.Run("repo", func(t *testing.T) {
		backendtest.Run(t, backendtest.Harness{Capabilities: local, Setup: func(t *testing.T) *backendtest.Provider {
			dir := testtree.Real(t, t.TempDir())
			repo := testtree.NewRepo(t, filepath.Join(dir, "repo"))
			other := testtree.NewRepo(t, filepath.Join(dir, "other"))
			w := &world{t: t, paths: map[string]string{}}
			return w.provider(&worktree.Backend{Repo: repo, Git: gitcmd.Runner{Timeout: time.Minute}},
				func(name string) string { return w.add(repo, filepath.Join(dir, "wts", name), "repo:"+name) },
				func(name string) string { return w.add(other, filepath.Join(dir, "other-wts", name), "other:"+name) })
		}})
	})
	t.Run("root", func(t *testing.T) {
		backendtest.Run(t, backendtest.Harness{Capabilities: local, Setup: func(t *testing.T) *backendtest.Provider {
			dir := testtree.Real(t, t.TempDir())
			repo := testtree.NewRepo(t, filepath.Join(dir, "repo"))
			root := filepath.Join(dir, "root")
			w := &world{t: t, paths: map[string]string{}}
			return w.provider(&worktree.Backend{Root: root, Git: gitcmd.Runner{Timeout: time.Minute}},
				func(name string) string { return w.add(repo, filepath.Join(root, "wts", name), "wts:"+name) },
				func(name string) string { return w.add(repo, filepath.Join(dir, "elsewhere", name), "elsewhere:"+name) })
		}})
	})
}

type world struct {
	t     *testing.T
	paths map[string]string // ID → folder
}

func (w *world) add(repo, path, id string) string {
	testtree.Git(w.t, repo, "worktree", "add", "-q", "-b", filepath.Base(filepath.Dir(path))+"-"+filepath.Base(path), path)
	testtree.Write(w.t, filepath.Join(path, "node_modules", "x", "index.js"), "x")
	w.paths[id] = path
	return id
}

func (w *world) provider(b *worktree.Backend, inside, outside func(name string) string) *backendtest.Provider {
	if b.Root != "" {
		if err := os.MkdirAll(b.Root, 0o755); err != nil {
			w.t.Fatal(err)
		}
	}
	return &backendtest.Provider{
		Backend:     b,
		Make:        func(t *testing.T, name string) string { return inside(name) },
		MakeOutside: func(t *testing.T, name string) string { return outside(name) },
		Exists: func(t *testing.T, id string) bool {
			_, err := os.Lstat(w.paths[id])
			return err == nil
		},
		Vanish: func(t *testing.T, id string) {
			if err := os.RemoveAll(w.paths[id]); err != nil {
				t.Fatal(err)
			}
		},
	}
}
