package archive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// RestoreWorktree brings an archived worktree back at dest (which must not
// exist) as a linked worktree of the repository at repoDir:
//
//   - branch is the worktree's branch (Snapshot.Branch) or, for a detached
//     worktree, its head commit (Snapshot.Head). A branch gone from the
//     repository is fetched from bundle; one that exists must point where
//     the bundle has it (else backend.ErrConflict: it moved since, and
//     checking it out would put the work on another base).
//   - snapshotRef ("" for none) is the ref SnapshotWorktree wrote. It is
//     fetched from bundle when the repository lacks it. Its working-tree
//     state is written into dest and its index state becomes dest's
//     index, without committing: what was modified, staged, deleted or
//     untracked before is so again, byte for byte.
//
// On error after the worktree was added, the new worktree is removed
// again; the repository keeps what was fetched (refs that were missing).
func RestoreWorktree(ctx context.Context, r gitcmd.Runner, repoDir, bundle, dest, branch, snapshotRef string) error {
	if err := restoreWorktree(ctx, r, repoDir, bundle, dest, branch, snapshotRef, IndexFlags{}); err != nil {
		return fmt.Errorf("restore worktree %s: %w", dest, err)
	}
	return nil
}

// resolve returns the commit name points at in dir, or "" when it has none.
func resolve(ctx context.Context, r gitcmd.Runner, dir, name string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--verify", "-q", name+"^{commit}")
	if exitCode(err) == 1 {
		return "", nil
	}
	return gitLine(out), err
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func restoreWorktree(ctx context.Context, r gitcmd.Runner, repoDir, bundle, dest, branch, snapshotRef string, flags IndexFlags) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("bad branch %q", branch)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s exists: %w", dest, os.ErrExist)
	}
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return err
	}
	if _, err := r.Run(ctx, repoDir, "bundle", "verify", "--quiet", bundle); err != nil {
		return err
	}
	h, err := readBundleHeader(bundle)
	if err != nil {
		return err
	}
	// fetch brings ref in from the bundle: unbundle (index-pack of the
	// bundle's pack, no transport involved) and a create-only update-ref.
	unbundled := false
	fetch := func(ref string) error {
		if !unbundled {
			if _, err := r.Run(ctx, repoDir, "bundle", "unbundle", bundle); err != nil {
				return err
			}
			unbundled = true
		}
		_, err := r.Run(ctx, repoDir, "update-ref", "-m", "reclaimer restore", ref, h.refs[ref], "")
		return err
	}

	// The commit to check out.
	branchRef := "refs/heads/" + branch
	repoTip, err := resolve(ctx, r, repoDir, branchRef)
	if err != nil {
		return err
	}
	bundleTip, inBundle := h.refs[branchRef]
	detached := repoTip == "" && !inBundle && isObjectID(branch)
	var head string
	switch {
	case detached:
		head = branch
	case repoTip == "" && inBundle:
		if err := fetch(branchRef); err != nil {
			return err
		}
		head = bundleTip
	case repoTip == "":
		return fmt.Errorf("branch %q is neither in the repository nor in the bundle: %w", branch, backend.ErrNotFound)
	case inBundle && repoTip != bundleTip:
		return fmt.Errorf("branch %q is at %s, the archive has it at %s: %w", branch, repoTip, bundleTip, backend.ErrConflict)
	default:
		head = repoTip
	}

	// The snapshot, and the index it recorded.
	var snap, index string
	if snapshotRef != "" {
		if snap, err = resolve(ctx, r, repoDir, snapshotRef); err != nil {
			return err
		}
		bundleSnap, ok := h.refs[snapshotRef]
		switch {
		case snap == "" && !ok:
			return fmt.Errorf("snapshot %q is neither in the repository nor in the bundle: %w", snapshotRef, backend.ErrNotFound)
		case snap == "":
			if err := fetch(snapshotRef); err != nil {
				return err
			}
			snap = bundleSnap
		case ok && snap != bundleSnap:
			return fmt.Errorf("snapshot %q is at %s, the archive has it at %s: %w", snapshotRef, snap, bundleSnap, backend.ErrConflict)
		}
	}
	if detached {
		if c, err := resolve(ctx, r, repoDir, head); err != nil || c != head {
			return fmt.Errorf("commit %s is not in the repository or the bundle: %w", head, backend.ErrNotFound)
		}
	}
	if snap == head {
		snap = "" // a detached HEAD kept reachable, no work on top
	}
	if snap != "" {
		out, err := r.Run(ctx, repoDir, "rev-list", "--parents", "-n", "1", snap)
		if err != nil {
			return err
		}
		f := strings.Fields(gitLine(out))
		if len(f) < 2 || f[1] != head {
			return fmt.Errorf("snapshot %s was not taken on %s: %w", snap, head, backend.ErrConflict)
		}
		index = head
		if len(f) >= 3 {
			index = f[2]
		}
	}

	add := []string{"worktree", "add", "--quiet", "--no-checkout"}
	if detached {
		add = append(add, "--detach", dest, head)
	} else {
		add = append(add, dest, branch)
	}
	if _, err := r.Run(ctx, repoDir, add...); err != nil {
		return err
	}
	fill := func() error {
		tree := head
		if snap != "" {
			tree = snap
		}
		if _, err := r.Run(ctx, dest, "read-tree", "--reset", "-u", tree); err != nil {
			return err
		}
		if snap != "" {
			if _, err := r.Run(ctx, dest, "read-tree", index); err != nil {
				return err
			}
		}
		// Stat data for the index, so status does not hash every file.
		if _, err := r.Run(ctx, dest, "update-index", "-q", "--refresh"); err != nil && exitCode(err) != 1 {
			return err
		}
		return setFlags(ctx, r, dest, flags)
	}
	if err := fill(); err != nil {
		if _, rerr := r.Run(ctx, repoDir, "worktree", "remove", "--force", dest); rerr != nil {
			return fmt.Errorf("%w (and removing the half-made worktree: %v)", err, rerr)
		}
		return err
	}
	return nil
}
