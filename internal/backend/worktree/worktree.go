package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/local"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// Name is the backend's name in runtime keys.
const Name = "worktree"

// Backend lists the worktrees of one source: set Repo or Root.
type Backend struct {
	Repo string // a repository: its linked worktrees
	Root string // a folder: linked worktrees found below it
	Git  gitcmd.Runner
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

type found struct {
	id, path, repo string // repo: the main worktree (or common dir's parent)
	head, branch   string
	locked         string
}

// List implements backend.Lister.
func (b *Backend) List(ctx context.Context, opts backend.ListOptions) ([]backend.Runtime, error) {
	all, err := b.find(ctx)
	if err != nil {
		return nil, err
	}
	var rts []backend.Runtime
	for _, f := range all {
		if len(opts.IDs) > 0 && !contains(opts.IDs, f.id) {
			continue
		}
		rts = append(rts, b.observe(ctx, f, opts.Light))
	}
	return rts, nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (b *Backend) find(ctx context.Context) ([]found, error) {
	if b.Repo != "" {
		return b.fromRepo(ctx, b.Repo, "")
	}
	// Every linked worktree (a folder whose .git is a file) up to three
	// levels below the root.
	var out []found
	seenRepos := map[string]bool{}
	err := walkDepth(b.Root, 3, func(dir string) bool {
		fi, err := os.Lstat(filepath.Join(dir, ".git"))
		if err != nil {
			return true // keep looking below
		}
		if fi.Mode().IsRegular() {
			common, err := b.Git.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
			if err == nil {
				repo := filepath.Dir(strings.TrimSpace(string(common)))
				if !seenRepos[repo] {
					seenRepos[repo] = true
					fs, _ := b.fromRepo(ctx, repo, b.Root)
					out = append(out, fs...)
				}
			}
		}
		return false // a checkout: do not descend
	})
	return out, err
}

// fromRepo lists the linked worktrees of repo, keeping only those under
// within when it is set.
func (b *Backend) fromRepo(ctx context.Context, repo, within string) ([]found, error) {
	wts, err := b.Git.Worktrees(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("list worktrees of %s: %w", repo, err)
	}
	var out []found
	for i, wt := range wts {
		if i == 0 || wt.Bare {
			continue // the main worktree is never a runtime
		}
		path := filepath.Clean(wt.Path)
		if within != "" && !local.Inside(within, path) {
			continue
		}
		if _, err := os.Lstat(path); err != nil {
			continue // prunable: the folder is already gone
		}
		f := found{path: path, repo: filepath.Clean(wts[0].Path), head: wt.HEAD, branch: wt.Branch}
		if wt.Locked {
			f.locked = "git worktree lock"
			if wt.LockReason != "" {
				f.locked += ": " + wt.LockReason
			}
		}
		if within != "" {
			rel, _ := filepath.Rel(within, path)
			f.id = strings.ReplaceAll(rel, "/", ":")
		} else {
			f.id = filepath.Base(f.repo) + ":" + filepath.Base(path)
		}
		out = append(out, f)
	}
	return out, nil
}

func walkDepth(dir string, depth int, visit func(dir string) (descend bool)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // links are never followed; the trash is hidden
		}
		sub := filepath.Join(dir, e.Name())
		if visit(sub) && depth > 1 {
			_ = walkDepth(sub, depth-1, visit)
		}
	}
	return nil
}

func (b *Backend) rootOf(path string) string {
	if b.Root != "" {
		return b.Root
	}
	return filepath.Dir(path)
}

func (b *Backend) observe(ctx context.Context, f found, light bool) backend.Runtime {
	rt := backend.Runtime{
		Key:    backend.Key{Backend: Name, ID: f.id},
		State:  backend.StateStopped,
		Path:   f.path,
		Root:   b.rootOf(f.path),
		Pinned: f.locked,
		Labels: map[string]string{"repo": f.repo},
	}
	if f.branch != "" {
		rt.Labels["branch"] = strings.TrimPrefix(f.branch, "refs/heads/")
	}
	if light {
		return rt
	}
	snap, err := archive.Inspect(ctx, b.Git, f.path)
	if err != nil {
		// Unknown state of the work: never remove it on a guess.
		rt.Unsaved = "unknown (git failed: " + err.Error() + ")"
	} else {
		rt.Unsaved = snap.Unsaved()
	}
	act := local.Activity(ctx, b.Git, rt)
	rt.LastActivity = act.Newest
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%s", f.path, f.head, act.Newest.UnixNano(), act.Files, rt.Unsaved))
	rt.Fingerprint = hex.EncodeToString(sum[:12])
	return rt
}

// ReclaimFiles implements backend.FileReclaimer.
func (b *Backend) ReclaimFiles(ctx context.Context, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	return local.Reclaim(ctx, b.Git, rt, opts)
}

// manifestExtra is what Restore needs besides the objects.
type manifestExtra struct {
	Repo        string `json:"repo"`
	Path        string `json:"path"`
	Branch      string `json:"branch"`
	Head        string `json:"head"`
	SnapshotRef string `json:"snapshot_ref"`
	Bundle      string `json:"bundle"`
}

// Export implements backend.Exporter.
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	repo := rt.Labels["repo"]
	ref := "refs/reclaimer/" + sanitizeRef(rt.ID) + "/" + time.Now().UTC().Format("20060102T150405Z")
	git := b.slowGit()
	snap, err := archive.SnapshotWorktree(ctx, git, rt.Path, ref)
	if err != nil {
		return backend.Export{}, fmt.Errorf("export %s: snapshot: %w", rt.Key, err)
	}
	refs := []string{}
	if snap.Branch != "" {
		refs = append(refs, "refs/heads/"+snap.Branch)
	} else {
		// Detached: keep the commit reachable through our own ref.
		headRef := ref + "-head"
		if _, err := b.Git.Run(ctx, rt.Path, "update-ref", headRef, snap.Head); err != nil {
			return backend.Export{}, fmt.Errorf("export %s: %w", rt.Key, err)
		}
		refs = append(refs, headRef)
	}
	if snap.Commit != "" {
		refs = append(refs, ref)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return backend.Export{}, fmt.Errorf("export %s: %w", rt.Key, err)
	}
	bundlePath := filepath.Join(opts.Dir, "worktree.bundle")
	obj, err := archive.WriteBundle(ctx, git, repo, bundlePath, refs)
	if err != nil {
		return backend.Export{}, fmt.Errorf("export %s: bundle: %w", rt.Key, err)
	}
	survives := []string{}
	if snap.Branch != "" {
		s := "branch " + snap.Branch
		if snap.Unpushed > 0 {
			s += fmt.Sprintf(" with %d commits not on any remote", snap.Unpushed)
		}
		survives = append(survives, s+" (kept in the repository and in the bundle)")
	} else {
		survives = append(survives, "detached HEAD "+snap.Head)
	}
	if snap.Changed > 0 {
		survives = append(survives, fmt.Sprintf("uncommitted changes to %d files", snap.Changed))
	}
	if snap.Untracked > 0 {
		survives = append(survives, fmt.Sprintf("%d untracked files", snap.Untracked))
	}
	deps, _ := local.Dependencies(ctx, b.Git, rt)
	var excluded []string
	for _, d := range deps {
		rel, _ := filepath.Rel(rt.Path, d.Path)
		excluded = append(excluded, rel)
	}
	if len(excluded) > 0 {
		survives = append(survives, strings.Join(excluded, ", ")+" NOT kept (git-ignored, rebuildable)")
	}
	survives = append(survives, "ignored files such as .env are NOT kept")
	extra, _ := json.Marshal(manifestExtra{Repo: repo, Path: rt.Path, Branch: snap.Branch, Head: snap.Head,
		SnapshotRef: map[bool]string{true: ref, false: ""}[snap.Commit != ""], Bundle: bundlePath})
	m := archive.Manifest{Runtime: rt.ID, Backend: Name, CreatedAt: time.Now().UTC(), Objects: []archive.Object{obj},
		Head: snap.Head, Branch: snap.Branch, Snapshot: snap.Commit, Remote: snap.Remote, Survives: survives, Excluded: excluded}
	if err := archive.WriteManifest(archive.ManifestPath(opts.Dir, "worktree"), m); err != nil {
		return backend.Export{}, fmt.Errorf("export %s: %w", rt.Key, err)
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "restore.json"), extra, 0o600); err != nil {
		return backend.Export{}, fmt.Errorf("export %s: %w", rt.Key, err)
	}
	return backend.Export{Location: opts.Dir, Formats: []string{"git-bundle"}, Bytes: obj.Bytes, Survives: survives,
		Restore: "reclaimer restore " + rt.ID}, nil
}

// slowGit is the runner for snapshots, bundles and restores: adding large
// untracked files or bundling a big history can take minutes, far past the
// timeout that suits the quick read-only calls of a pass.
func (b *Backend) slowGit() gitcmd.Runner {
	g := b.Git
	g.Timeout = max(g.Timeout, 30*time.Minute)
	return g
}

func sanitizeRef(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, id)
}

// Delete implements backend.Deleter: the worktree folder goes into the
// trash and git forgets it; the branch and its commits stay.
func (b *Backend) Delete(ctx context.Context, rt backend.Runtime, opts backend.DeleteOptions) error {
	repo := rt.Labels["repo"]
	if repo == "" || rt.Path == filepath.Clean(repo) || !local.Inside(rt.Root, rt.Path) {
		return fmt.Errorf("delete %s: %q is not a linked worktree inside %s: %w", rt.Key, rt.Path, rt.Root, backend.ErrProtected)
	}
	// Never take another checkout along: a worktree or the repository
	// itself nested inside this one.
	wts, err := b.Git.Worktrees(ctx, repo)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	for _, wt := range wts {
		if local.Inside(rt.Path, filepath.Clean(wt.Path)) {
			return fmt.Errorf("delete %s: %s holds another checkout, %s: %w", rt.Key, rt.Path, wt.Path, backend.ErrProtected)
		}
	}
	if err := opts.Discard(rt.Path); err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	if _, err := b.Git.Run(ctx, repo, "worktree", "prune"); err != nil {
		return fmt.Errorf("delete %s: the folder is in the trash, but git worktree prune failed: %w", rt.Key, err)
	}
	return nil
}

// Restore implements backend.Restorer.
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	data, err := os.ReadFile(filepath.Join(opts.Location, "restore.json"))
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	var x manifestExtra
	if err := json.Unmarshal(data, &x); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	m, err := archive.ReadManifest(archive.ManifestPath(opts.Location, "worktree"))
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	if err := m.Verify(ctx); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	dest := opts.To
	if dest == "" {
		dest = x.Path
	}
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf("restore %s: %s already exists: %w", k, dest, backend.ErrConflict)
	}
	if err := archive.RestoreWorktree(ctx, b.slowGit(), x.Repo, x.Bundle, dest, x.Branch, x.SnapshotRef); err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	return dest, nil
}

var (
	_ backend.Lister        = (*Backend)(nil)
	_ backend.FileReclaimer = (*Backend)(nil)
	_ backend.Exporter      = (*Backend)(nil)
	_ backend.Deleter       = (*Backend)(nil)
	_ backend.Restorer      = (*Backend)(nil)
)
