package worktree

import (
	"context"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// mergedWork clears snap's unpushed commits when they are all in the
// repository's default branch (merged, rebased or squashed: see
// gitcmd.Integrated) and says so ("merged into main"); otherwise it counts
// only the commits in no integration branch. Uncommitted and untracked
// work still counts. When git cannot tell (an error, too much history),
// every unpushed commit stays unsaved: an archive keeps them.
func (b *Backend) mergedWork(ctx context.Context, path string, snap *archive.Snapshot) string {
	if snap.Unpushed == 0 || snap.Head == "" {
		return ""
	}
	in, ok, err := b.merged.Integrated(ctx, b.Git, path, snap.Head, gitcmd.IntegrationOptions{Branch: snap.Branch})
	switch {
	case err != nil:
		return ""
	case !ok:
		snap.Unpushed = min(snap.Unpushed, in.Remaining)
		return ""
	}
	snap.Unpushed = 0
	return in.String()
}
