package archive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// IndexFlags are the index entries whose flags hide work-tree edits from
// git status: assume-unchanged and skip-worktree. SnapshotWorktree clears
// them on its private copy of the index, so the snapshot holds what the
// files really contain, and RestoreWorktree sets them again. SkipAbsent are
// the skip-worktree paths missing from the work tree (a sparse checkout):
// they stay missing after a restore.
type IndexFlags struct {
	AssumeUnchanged []string `json:"assume_unchanged,omitempty"`
	SkipWorktree    []string `json:"skip_worktree,omitempty"`
	SkipAbsent      []string `json:"skip_absent,omitempty"`
}

func (f IndexFlags) empty() bool {
	return len(f.AssumeUnchanged) == 0 && len(f.SkipWorktree) == 0
}

// inProgress are the files of a git folder that mean an operation is half
// done: a snapshot commit cannot hold them (the merge heads, the unmerged
// index stages, the rebase todo), so a worktree with one is not archived.
var inProgress = []struct{ name, what string }{
	{"MERGE_HEAD", "a merge in progress"},
	{"CHERRY_PICK_HEAD", "a cherry-pick in progress"},
	{"REVERT_HEAD", "a revert in progress"},
	{"rebase-merge", "a rebase in progress"},
	{"rebase-apply", "a rebase or am in progress"},
	{"sequencer", "a cherry-pick or revert sequence in progress"},
	{"BISECT_LOG", "a bisect in progress"},
}

// indexState reads what the index says beyond git status: the flagged
// entries (with how many of them differ from the index: edits status does
// not show), and the gitlinks that are checked out (submodules, embedded
// repositories). One git ls-files, and one hash-object for the flagged
// files present.
func indexState(ctx context.Context, r gitcmd.Runner, top string) (flags IndexFlags, changed int, checkedOut []string, err error) {
	out, err := r.Run(ctx, top, "ls-files", "-z", "-v", "-s")
	if err != nil {
		return flags, 0, nil, fmt.Errorf("list index: %w", err)
	}
	var hashPaths, hashWant []string
	for _, rec := range bytes.Split(out, []byte{0}) {
		// "<tag> <mode> <oid> <stage>\t<path>"
		head, path, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(head))
		if !ok || len(f) != 4 {
			continue
		}
		tag, mode, oid, p := f[0], f[1], f[2], string(path)
		if mode == "160000" {
			if _, err := os.Lstat(filepath.Join(top, p, ".git")); err == nil {
				checkedOut = append(checkedOut, p)
			}
			continue
		}
		if f[3] != "0" {
			continue // unmerged: status reports it
		}
		switch {
		case tag == "S":
			if _, err := os.Lstat(filepath.Join(top, p)); err != nil {
				flags.SkipAbsent = append(flags.SkipAbsent, p)
				flags.SkipWorktree = append(flags.SkipWorktree, p)
				continue
			}
			flags.SkipWorktree = append(flags.SkipWorktree, p)
		case tag != strings.ToUpper(tag):
			flags.AssumeUnchanged = append(flags.AssumeUnchanged, p)
		default:
			continue
		}
		if mode == "100644" || mode == "100755" {
			hashPaths, hashWant = append(hashPaths, p), append(hashWant, oid)
		} else {
			changed++ // a flagged link: count it as changed, the snapshot keeps it
		}
	}
	if len(hashPaths) > 0 {
		// --no-filters: no clean filter of the agent's runs, and the
		// index holds the blob as git stored it.
		got, err := r.RunInput(ctx, top, strings.NewReader(strings.Join(hashPaths, "\n")+"\n"), nil,
			"hash-object", "--no-filters", "--stdin-paths")
		if err != nil {
			return flags, 0, nil, fmt.Errorf("hash flagged files: %w", err)
		}
		sums := strings.Fields(string(got))
		for i := range hashPaths {
			if i >= len(sums) || sums[i] != hashWant[i] {
				changed++
			}
		}
	}
	return flags, changed, checkedOut, nil
}

// unarchivable lists the states of the worktree at top that a snapshot
// cannot hold and a restore could not bring back exactly: an operation in
// progress (its git folder's MERGE_HEAD, rebase todo, ...), unmerged
// paths, and checked-out submodules or embedded repositories (their own
// repositories, in .git/modules or in the folder, are not archived).
func unarchivable(ctx context.Context, r gitcmd.Runner, top string, unmerged, checkedOut []string) ([]string, error) {
	var out []string
	gitDir, err := r.GitDir(ctx, top)
	if err != nil {
		return nil, err
	}
	for _, p := range inProgress {
		if _, err := os.Lstat(filepath.Join(gitDir, p.name)); err == nil {
			out = append(out, p.what)
		}
	}
	if len(unmerged) > 0 {
		out = append(out, plural(len(unmerged), "unmerged path", "unmerged paths")+" ("+strings.Join(unmerged, ", ")+")")
	}
	for _, p := range checkedOut {
		out = append(out, "submodule "+p+" (its repository is not archived)")
	}
	return out, nil
}

// clearFlags clears the assume-unchanged flags, and the skip-worktree flags
// of files present, on the index env points at (a private copy), so git
// add sees what the files hold.
func clearFlags(run func(stdin string, args ...string) (string, error), f IndexFlags) error {
	absent := map[string]bool{}
	for _, p := range f.SkipAbsent {
		absent[p] = true
	}
	var present []string
	for _, p := range f.SkipWorktree {
		if !absent[p] {
			present = append(present, p)
		}
	}
	for _, c := range []struct {
		flag  string
		paths []string
	}{{"--no-assume-unchanged", f.AssumeUnchanged}, {"--no-skip-worktree", present}} {
		if len(c.paths) == 0 {
			continue
		}
		if _, err := run(strings.Join(c.paths, "\x00")+"\x00", "update-index", c.flag, "-z", "--stdin"); err != nil {
			return fmt.Errorf("clear index flags: %w", err)
		}
	}
	return nil
}

// setFlags sets the recorded flags again in a restored worktree and
// removes the skip-worktree files that were absent.
func setFlags(ctx context.Context, r gitcmd.Runner, dest string, f IndexFlags) error {
	for _, p := range f.SkipAbsent {
		if !filepath.IsLocal(p) {
			return fmt.Errorf("skip-worktree path %q leaves the worktree", p)
		}
		if err := os.Remove(filepath.Join(dest, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, c := range []struct {
		flag  string
		paths []string
	}{{"--assume-unchanged", f.AssumeUnchanged}, {"--skip-worktree", f.SkipWorktree}} {
		if len(c.paths) == 0 {
			continue
		}
		if _, err := r.RunInput(ctx, dest, strings.NewReader(strings.Join(c.paths, "\x00")+"\x00"), nil,
			"update-index", c.flag, "-z", "--stdin"); err != nil {
			return fmt.Errorf("set index flags: %w", err)
		}
	}
	return nil
}
