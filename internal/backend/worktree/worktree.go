package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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

	merged gitcmd.IntegrationCache // merged.go
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

type found struct {
	id, path, repo string // repo: the main worktree (or common dir's parent)
	head, branch   string
	locked         string
	root           string // the managed root; empty when not proven
	unproven       string // why the folder was not proven to be this worktree
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
		if err := local.Folder("repository", b.Repo); err != nil {
			return nil, err
		}
		return b.fromRepo(ctx, b.Repo, "")
	}
	if err := local.Folder("folder", b.Root); err != nil {
		return nil, err
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
			common, err := b.Git.CommonDir(ctx, dir)
			if err == nil {
				repo := filepath.Dir(common)
				// The other side first: the .git file found here must be one
				// of common's entries naming this folder back.
				if _, err := proveLinked(common, dir); err != nil {
					return false
				}
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
		return nil, err // it names the repository already
	}
	common, err := b.Git.CommonDir(ctx, repo)
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
		if _, err = proveLinked(common, path); err != nil {
			f.unproven = err.Error()
		} else if within != "" {
			f.root = within
		} else if f.root, err = derivedRoot(path); err != nil {
			f.unproven = err.Error()
		}
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

func (b *Backend) observe(ctx context.Context, f found, light bool) backend.Runtime {
	rt := backend.Runtime{
		Key:    backend.Key{Backend: Name, ID: f.id},
		State:  backend.StateStopped,
		Path:   f.path,
		Root:   f.root,
		Pinned: f.locked,
		Labels: map[string]string{"repo": f.repo},
	}
	if f.unproven != "" {
		// Reported, never acted on: no managed root, and protected.
		rt.Pinned = f.unproven
		return rt
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
		rt.Merged = b.mergedWork(ctx, f.path, &snap)
		rt.Unsaved = snap.Unsaved()
		rt.Unarchivable = snap.CannotArchive()
	}
	act := local.Activity(ctx, b.Git, rt)
	rt.LastActivity = act.Newest
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%s\x00%s", f.path, f.head, act.Newest.UnixNano(), act.Files, rt.Unsaved, rt.Unarchivable))
	rt.Fingerprint = hex.EncodeToString(sum[:12])
	return rt
}

// ReclaimFiles implements backend.FileReclaimer.
func (b *Backend) ReclaimFiles(ctx context.Context, rt backend.Runtime, opts backend.FileOptions) ([]backend.File, error) {
	return local.Reclaim(ctx, b.Git, rt, opts)
}

// Export implements backend.Exporter: a git bundle of the branch and a
// snapshot of uncommitted and untracked work, and a patch from the base
// commit, stored in opts.Sink and read back (archive.ExportWorktree).
func (b *Backend) Export(ctx context.Context, rt backend.Runtime, opts backend.ExportOptions) (backend.Export, error) {
	repo := rt.Labels["repo"]
	if repo == "" {
		return backend.Export{}, fmt.Errorf("export %s: no repository label", rt.Key)
	}
	at := opts.CreatedAt
	if at.IsZero() {
		at = time.Now()
	}
	ref := snapshotRef(rt.ID, at)
	deps, _ := local.Dependencies(ctx, b.Git, rt, opts.Rebuildable, opts.Keep) // only listed: git never holds them
	var depPaths []string
	for _, d := range deps {
		depPaths = append(depPaths, d.Path)
	}
	m, err := archive.ExportWorktree(ctx, b.slowGit(), archive.Request{Sink: opts.Sink, Base: opts.Name, Runtime: rt.ID,
		Backend: Name, Conversations: opts.Conversations, CreatedAt: at, Staging: opts.Dir,
		IncludeDependencies: opts.IncludeDependencies},
		archive.Worktree{Path: rt.Path, Repo: repo, Ref: ref, Dependencies: depPaths})
	if err != nil {
		return backend.Export{}, err
	}
	return m.BackendExport(), nil
}

// slowGit is the runner for snapshots, bundles and restores: adding large
// untracked files or bundling a big history can take minutes, far past the
// timeout that suits the quick read-only calls of a pass.
func (b *Backend) slowGit() gitcmd.Runner {
	g := b.Git
	g.Timeout = max(g.Timeout, 30*time.Minute)
	return g
}

// snapshotRef is the ref an export of runtime id at time at writes.
func snapshotRef(id string, at time.Time) string {
	return archive.SnapshotRefPrefix + sanitizeRef(id) + "/" + at.UTC().Format("20060102T150405Z")
}

// AbandonExport implements backend.ExportAbandoner: the snapshot refs of
// an export a crash interrupted leave the user's repository.
func (b *Backend) AbandonExport(ctx context.Context, rt backend.Runtime, at time.Time) error {
	repo := rt.Labels["repo"]
	if repo == "" {
		return fmt.Errorf("abandon export of %s: no repository label", rt.Key)
	}
	return archive.DropSnapshotRefs(ctx, b.Git, repo, snapshotRef(rt.ID, at))
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
	if _, err := os.Lstat(rt.Path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %s is gone already: %w", rt.Key, rt.Path, backend.ErrNotFound)
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
	want := b.Root
	if want == "" {
		var err error
		if want, err = derivedRoot(rt.Path); err != nil {
			return fmt.Errorf("delete %s: %w: %w", rt.Key, err, backend.ErrProtected)
		}
	}
	if rt.Root != want {
		return fmt.Errorf("delete %s: its root %q is not this source's %q: %w", rt.Key, rt.Root, want, backend.ErrProtected)
	}
	// Prove it again, from both sides, right before the rename.
	common, err := b.Git.CommonDir(ctx, repo)
	if err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	admin, err := proveLinked(common, rt.Path)
	if err != nil {
		return fmt.Errorf("delete %s: %w: %w", rt.Key, err, backend.ErrProtected)
	}
	if err := opts.Discard(rt.Path); err != nil {
		return fmt.Errorf("delete %s: %w", rt.Key, err)
	}
	if err := removeAdmin(ctx, admin, rt.Path); err != nil {
		return fmt.Errorf("delete %s: the folder is in the trash, but %w", rt.Key, err)
	}
	return nil
}

// Restore implements backend.Restorer: the bundle is read from the sink
// and the worktree added back to its repository with its branch, snapshot
// and uncommitted work (archive.RestoreWorktreeFrom), where it was or into
// opts.To (backend.RestoreTarget; locked there: a copy, not a runtime).
func (b *Backend) Restore(ctx context.Context, k backend.Key, opts backend.RestoreOptions) (string, error) {
	m, err := archive.ParseManifest(opts.Manifest)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", k, err)
	}
	dest := backend.RestoreTarget(opts.To, m.Path)
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf("restore %s: %s already exists: %w", k, dest, backend.ErrConflict)
	}
	path, err := archive.RestoreWorktreeFrom(ctx, b.slowGit(), opts.Sink, m, dest, opts.Staging)
	if err != nil || opts.To == "" {
		return path, err
	}
	// A copy restored elsewhere is the user's, not a runtime: git lists it
	// as a worktree of the repository, so it is locked, and a locked
	// worktree is never touched (no pass archives it, no trash is made
	// beside it). Unlocking it hands it to reclaimer.
	reason := "restored by reclaimer from " + k.String() + " to look at; git worktree unlock to let reclaimer manage it"
	if _, err := b.slowGit().Run(ctx, m.Repo, "worktree", "lock", "--reason", reason, path); err != nil {
		return path, fmt.Errorf("restore %s: restored into %s, but could not lock it: %w", k, path, err)
	}
	return path, nil
}

var (
	_ backend.Lister        = (*Backend)(nil)
	_ backend.FileReclaimer = (*Backend)(nil)
	_ backend.Exporter      = (*Backend)(nil)
	_ backend.Deleter       = (*Backend)(nil)
	_ backend.Restorer      = (*Backend)(nil)
)

// ManagedRoots implements backend.Rooted: the configured root; a
// repository source has none to offer a caller (its roots are derived from
// proven worktrees only).
func (b *Backend) ManagedRoots() []string {
	if b.Root == "" {
		return nil
	}
	return []string{b.Root}
}

var (
	_ backend.Rooted          = (*Backend)(nil)
	_ backend.ExportAbandoner = (*Backend)(nil)
)
