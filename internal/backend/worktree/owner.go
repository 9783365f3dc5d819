package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/reclaimer/reclaimer/internal/deletion"
	"github.com/reclaimer/reclaimer/internal/rootcheck"
)

// errUnproven reports a worktree git lists whose folder could not be proven
// to belong to the repository (see proveLinked).
var errUnproven = errors.New("not proven to be a worktree of this repository")

// maxLinkFile bounds what is read of a .git file or an admin folder's gitdir
// file: git writes one line with one path.
const maxLinkFile = 4096

// proveLinked checks, from both sides, that path is a linked worktree that
// git created for the repository whose common git folder is common, and
// returns its admin folder (common/worktrees/<name>).
//
// git's own word (worktree list, which reads common/worktrees/*/gitdir) is
// not proof: whoever writes the repository's .git can make it name any
// folder, a full clone elsewhere say. So:
//
//   - path is absolute, clean and reached without a symbolic link;
//   - path/.git is a regular file (not a link, not a folder: a clone has a
//     folder) whose "gitdir: X" names X = common/worktrees/<name>, a real
//     folder inside common/worktrees;
//   - that admin folder's own gitdir file names path/.git back.
//
// Forging this needs write access to the folder itself, which is then the
// writer's to remove anyway.
func proveLinked(common, path string) (admin string, err error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%s: %w: %s", path, errUnproven, fmt.Sprintf(format, args...))
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fail("not a clean absolute path")
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		return fail("reached through a symbolic link")
	}
	dotGit := filepath.Join(path, ".git")
	target, err := readLinkFile(dotGit, "gitdir: ")
	if err != nil {
		return fail("%v", err)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(path, target)
	}
	admin = filepath.Clean(target)
	worktrees := filepath.Join(common, "worktrees")
	if filepath.Dir(admin) != worktrees {
		return fail("its .git names %s, not an entry of %s", admin, worktrees)
	}
	if fi, err := os.Lstat(admin); err != nil || !fi.IsDir() {
		return fail("its admin folder %s is not a folder", admin)
	}
	back, err := readLinkFile(filepath.Join(admin, "gitdir"), "")
	if err != nil {
		return fail("%v", err)
	}
	if !filepath.IsAbs(back) {
		back = filepath.Join(admin, back)
	}
	if filepath.Clean(back) != dotGit {
		return fail("%s/gitdir names %s, not this folder's .git", admin, back)
	}
	return admin, nil
}

// readLinkFile reads the one-line file git writes to link a worktree and
// its admin folder, refusing anything but a small regular file (a FIFO
// would block, a link could lead anywhere).
func readLinkFile(p, prefix string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxLinkFile+1))
	if err != nil || len(data) > maxLinkFile {
		return "", fmt.Errorf("read %s: not a link file", p)
	}
	s := strings.TrimRight(string(data), "\r\n")
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" || strings.ContainsAny(rest, "\n\x00") {
		return "", fmt.Errorf("%s does not hold one %spath line", p, prefix)
	}
	return rest, nil
}

// derivedRoot is the managed root of a worktree of a repo source that
// proveLinked proved: the folder git created it in, derived only from that
// proof (never from git's list alone). It is refused when it is "/" or a
// system folder (rootcheck.Check).
func derivedRoot(path string) (string, error) {
	root := filepath.Dir(path)
	if err := rootcheck.Check(root); err != nil {
		return "", err
	}
	return root, nil
}

// removeAdmin removes exactly the admin folder of the worktree that was at
// path (git worktree remove semantics on that one entry), after checking it
// still names path: never a repository-wide prune, which would also take the
// admin folders of worktrees whose folder is absent for now (an unplugged
// disk, a worktree made in a container).
func removeAdmin(ctx context.Context, admin, path string) error {
	back, err := readLinkFile(filepath.Join(admin, "gitdir"), "")
	if err != nil {
		return fmt.Errorf("remove worktree entry %s: %w", admin, err)
	}
	if !filepath.IsAbs(back) {
		back = filepath.Join(admin, back)
	}
	if filepath.Clean(back) != filepath.Join(path, ".git") {
		return fmt.Errorf("remove worktree entry %s: it now names %s, not %s", admin, back, path)
	}
	res, err := deletion.Delete(ctx, filepath.Dir(admin), filepath.Base(admin), deletion.Options{})
	if err == nil {
		err = res.Err()
	}
	if err == nil && res.SkippedCount > 0 {
		err = fmt.Errorf("%d mount points inside it", res.SkippedCount)
	}
	if err != nil {
		return fmt.Errorf("remove worktree entry %s: %w", admin, err)
	}
	return nil
}
