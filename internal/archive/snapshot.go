package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// SnapshotRefPrefix is the namespace of the refs Snapshot writes.
const SnapshotRefPrefix = "refs/reclaimer/"

// Identity is the author and committer of snapshot commits, passed in the
// environment: the user's config may have none, and must not be used.
const (
	IdentityName  = "reclaimer"
	IdentityEmail = "reclaimer@localhost"
)

// Snapshot is what a worktree holds that a removal could lose.
type Snapshot struct {
	// Head is the commit HEAD points at; "" on an unborn branch.
	Head string `json:"head,omitempty"`
	// Branch is the short name of the checked-out branch; "" when
	// detached.
	Branch string `json:"branch,omitempty"`
	// Commit is the snapshot commit (uncommitted and untracked work);
	// "" when there was nothing uncommitted or untracked.
	Commit string `json:"commit,omitempty"`
	// Ref is the ref Snapshot wrote: it points at Commit or, for a
	// detached HEAD with nothing uncommitted, at Head so its commits stay
	// reachable. "" when nothing was written (and always for Inspect).
	Ref string `json:"ref,omitempty"`
	// Changed counts tracked files changed against HEAD, staged or not.
	Changed int `json:"changed"`
	// Untracked counts untracked files that are not ignored.
	Untracked int `json:"untracked"`
	// Unpushed counts commits reachable from HEAD and from no
	// remote-tracking ref.
	Unpushed int `json:"unpushed"`
	// Remote is the URL of the branch's upstream remote, or of "origin";
	// "" when there is none. Inspect leaves it empty.
	Remote string `json:"remote,omitempty"`
	// Nested are untracked folders holding a git repository of their own
	// (ending in "/"). A snapshot cannot hold them; ExportWorktree stores
	// each as a tar.
	Nested []string `json:"nested,omitempty"`
	// Flags are the index entries marked assume-unchanged or
	// skip-worktree; their edits count in Changed.
	Flags IndexFlags `json:"flags,omitzero"`
	// Unarchivable are states the archive cannot hold and a restore could
	// not bring back exactly (a merge in progress, a checked-out
	// submodule): a worktree with any is never removed. (Untracked nested
	// repositories are not among them: ExportWorktree stores each whole.)
	Unarchivable []string `json:"unarchivable,omitempty"`
}

// CannotArchive says in plain words what of the worktree cannot be
// archived and restored exactly; "" when everything can.
func (s Snapshot) CannotArchive() string { return strings.Join(s.Unarchivable, "; ") }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Unsaved describes in plain words what removing the worktree would lose
// without an archive; "" when nothing.
func (s Snapshot) Unsaved() string {
	var parts []string
	if s.Changed > 0 {
		parts = append(parts, "uncommitted changes to "+plural(s.Changed, "file", "files"))
	}
	if s.Untracked > 0 {
		parts = append(parts, plural(s.Untracked, "untracked file", "untracked files"))
	}
	if s.Unpushed > 0 {
		parts = append(parts, plural(s.Unpushed, "commit", "commits")+" not on any remote")
	}
	if len(s.Nested) > 0 {
		parts = append(parts, plural(len(s.Nested), "untracked nested repository", "untracked nested repositories")+
			" ("+strings.Join(s.Nested, ", ")+")")
	}
	return strings.Join(parts, "; ")
}

func gitLine(out []byte) string { return strings.TrimSuffix(string(out), "\n") }

// exitCode is the exit status of a git command that ran and failed, or -1.
func exitCode(err error) int {
	var ge *gitcmd.Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// Inspect counts what the worktree holds that a removal could lose, writing
// nothing: one git status and, unless HEAD is unborn, one git rev-list.
// Changes inside submodules are not looked at (git would run with the
// submodule's own config).
func Inspect(ctx context.Context, r gitcmd.Runner, worktree string) (Snapshot, error) {
	s, _, err := inspect(ctx, r, worktree)
	return s, err
}

func inspect(ctx context.Context, r gitcmd.Runner, worktree string) (Snapshot, []string, error) {
	var s Snapshot
	var unmerged []string
	out, err := r.Run(ctx, worktree, "status", "--porcelain=v2", "-z", "--branch",
		"--untracked-files=all", "--ignored=no", "--ignore-submodules=dirty")
	if err != nil {
		return s, nil, fmt.Errorf("inspect worktree %s: %w", worktree, err)
	}
	for _, rec := range bytes.Split(out, []byte{0}) {
		line, ok := bytes.CutPrefix(rec, []byte("# "))
		if !ok {
			continue
		}
		key, value, _ := strings.Cut(string(line), " ")
		switch key {
		case "branch.oid":
			if value != "(initial)" {
				s.Head = value
			}
		case "branch.head":
			if value != "(detached)" {
				s.Branch = value
			}
		}
	}
	entries, err := gitcmd.ParseStatusV2(out)
	if err != nil {
		return s, nil, fmt.Errorf("inspect worktree %s: %w", worktree, err)
	}
	for _, e := range entries {
		switch {
		case e.Kind == gitcmd.Untracked && e.IsDir():
			s.Nested = append(s.Nested, e.Path)
		case e.Kind == gitcmd.Untracked:
			s.Untracked++
		case e.Kind == gitcmd.Unmerged:
			s.Changed++
			unmerged = append(unmerged, e.Path)
		case e.Kind == gitcmd.Changed || e.Kind == gitcmd.Renamed:
			s.Changed++
		}
	}
	flags, flaggedChanged, checkedOut, err := indexState(ctx, r, worktree)
	if err != nil {
		return s, nil, fmt.Errorf("inspect worktree %s: %w", worktree, err)
	}
	s.Flags = flags
	s.Changed += flaggedChanged
	if s.Unarchivable, err = unarchivable(ctx, r, worktree, unmerged, checkedOut); err != nil {
		return s, nil, fmt.Errorf("inspect worktree %s: %w", worktree, err)
	}
	if s.Head != "" {
		out, err := r.Run(ctx, worktree, "rev-list", "--count", s.Head, "--not", "--remotes")
		if err != nil {
			return s, nil, fmt.Errorf("inspect worktree %s: %w", worktree, err)
		}
		if s.Unpushed, err = strconv.Atoi(gitLine(out)); err != nil {
			return s, nil, fmt.Errorf("inspect worktree %s: count unpushed commits: %w", worktree, err)
		}
	}
	return s, unmerged, nil
}

// remoteURL is the URL of branch's upstream remote, or of "origin".
func remoteURL(ctx context.Context, r gitcmd.Runner, dir, branch string) (string, error) {
	name := "origin"
	if branch != "" {
		out, err := r.Run(ctx, dir, "config", "--get", "branch."+branch+".remote")
		switch {
		case err == nil && gitLine(out) != "" && gitLine(out) != ".":
			name = gitLine(out)
		case err != nil && exitCode(err) != 1:
			return "", err
		}
	}
	out, err := r.Run(ctx, dir, "config", "--get", "remote."+name+".url")
	if exitCode(err) == 1 {
		return "", nil
	}
	return gitLine(out), err
}

// SnapshotWorktree records the worktree's uncommitted and untracked (not ignored)
// work as a commit under ref (which must start with refs/reclaimer/),
// without touching the user's branch, index or working tree: git runs on a
// copy of the index (GIT_INDEX_FILE), and only objects and ref are written.
//
// The snapshot commit has the shape of a git stash entry: its tree is the
// working tree as `git add -A` would stage it, its first parent is HEAD and
// its second parent a commit of the user's index, so RestoreWorktree (or
// `git stash apply --index <ref>` by hand) brings back staged and unstaged
// changes apart. With nothing uncommitted or untracked there is no commit
// (Commit == ""); a detached HEAD then gets ref pointed at it, so its
// commits survive the worktree. Untracked nested repositories are left out
// and listed in Nested.
//
// Running it again with nothing changed returns the same commit.
//
// (It cannot be called Snapshot: that is the name of its result type.)
func SnapshotWorktree(ctx context.Context, r gitcmd.Runner, worktree, ref string) (Snapshot, error) {
	s, err := snapshot(ctx, r, worktree, ref, time.Now())
	if err != nil {
		return s, fmt.Errorf("snapshot worktree %s: %w", worktree, err)
	}
	return s, nil
}

func snapshot(ctx context.Context, r gitcmd.Runner, worktree, ref string, now time.Time) (Snapshot, error) {
	if !strings.HasPrefix(ref, SnapshotRefPrefix) || len(ref) == len(SnapshotRefPrefix) {
		return Snapshot{}, fmt.Errorf("ref %q is not under %s", ref, SnapshotRefPrefix)
	}
	top, err := r.TopLevel(ctx, worktree)
	if err != nil {
		return Snapshot{}, err
	}
	s, unmerged, err := inspect(ctx, r, top)
	if err != nil {
		return s, err
	}
	if why := s.CannotArchive(); why != "" {
		return s, fmt.Errorf("it holds what cannot be archived and restored exactly: %s: %w", why, errors.ErrUnsupported)
	}
	if s.Remote, err = remoteURL(ctx, r, top, s.Branch); err != nil {
		return s, err
	}
	if s.Changed == 0 && s.Untracked == 0 {
		return s, keepDetached(ctx, r, top, ref, &s)
	}

	index, err := r.GitPath(ctx, top, "index")
	if err != nil {
		return s, err
	}
	tmp, err := os.MkdirTemp("", "reclaimer-index-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(tmp)
	tmpIndex := filepath.Join(tmp, "index")
	if err := copyFile(index, tmpIndex); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("copy index: %w", err)
	}
	env := []string{
		"GIT_INDEX_FILE=" + tmpIndex,
		"GIT_AUTHOR_NAME=" + IdentityName, "GIT_AUTHOR_EMAIL=" + IdentityEmail,
		"GIT_COMMITTER_NAME=" + IdentityName, "GIT_COMMITTER_EMAIL=" + IdentityEmail,
		fmt.Sprintf("GIT_AUTHOR_DATE=@%d +0000", now.Unix()),
		fmt.Sprintf("GIT_COMMITTER_DATE=@%d +0000", now.Unix()),
	}
	run := func(stdin string, args ...string) (string, error) {
		var in io.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		out, err := r.RunInput(ctx, top, in, env, args...)
		return gitLine(out), err
	}

	// The index as the user staged it. Unmerged paths cannot be written
	// as a tree: they are taken as they are in the working tree.
	if len(unmerged) > 0 {
		var spec strings.Builder
		for _, p := range unmerged {
			spec.WriteString(":(literal)" + p + "\x00")
		}
		if _, err := run(spec.String(), "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return s, err
		}
	}
	indexTree, err := run("", "write-tree")
	if err != nil {
		return s, err
	}
	// Flagged entries: git add must look at what the files hold.
	if err := clearFlags(run, s.Flags); err != nil {
		return s, err
	}
	// The working tree, untracked files included, ignored ones not.
	spec := ".\x00"
	for _, n := range s.Nested {
		spec += ":(exclude,literal)" + strings.TrimSuffix(n, "/") + "\x00"
	}
	if _, err := run(spec, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
		return s, err
	}
	workTree, err := run("", "write-tree")
	if err != nil {
		return s, err
	}
	var headTree string
	if s.Head != "" {
		headTree, err = run("", "rev-parse", "--verify", s.Head+"^{tree}")
	} else {
		headTree, err = run("", "hash-object", "-t", "tree", "--stdin")
	}
	if err != nil {
		return s, err
	}
	if workTree == headTree && indexTree == headTree {
		// Status saw changes that staging does not keep (a mode-only
		// change with core.fileMode off, say).
		return s, keepDetached(ctx, r, top, ref, &s)
	}
	// Idempotent: the same work on the same HEAD keeps the same commit.
	if prev, err := run("", "rev-parse", ref+"^{commit}", ref+"^{tree}", ref+"^2^{tree}", ref+"^1"); err == nil && s.Head != "" {
		f := strings.Split(prev, "\n")
		if len(f) == 4 && f[1] == workTree && f[2] == indexTree && f[3] == s.Head {
			s.Commit, s.Ref = f[0], ref
			return s, nil
		}
	}
	var parents []string
	if s.Head != "" {
		parents = []string{"-p", s.Head}
	}
	when := now.UTC().Format(time.RFC3339)
	indexCommit, err := run("", append(append([]string{"commit-tree", "--no-gpg-sign"}, parents...),
		"-m", "reclaimer index of "+top+" at "+when, indexTree)...)
	if err != nil {
		return s, err
	}
	commit, err := run("", append(append([]string{"commit-tree", "--no-gpg-sign"}, parents...),
		"-p", indexCommit, "-m", "reclaimer snapshot of "+top+" at "+when, workTree)...)
	if err != nil {
		return s, err
	}
	if _, err := r.Run(ctx, top, "update-ref", "-m", "reclaimer snapshot", ref, commit); err != nil {
		return s, err
	}
	s.Commit, s.Ref = commit, ref
	return s, nil
}

// keepDetached points ref at a detached HEAD, so its commits stay
// reachable once the worktree is gone.
func keepDetached(ctx context.Context, r gitcmd.Runner, dir, ref string, s *Snapshot) error {
	if s.Branch != "" || s.Head == "" {
		return nil
	}
	if _, err := r.Run(ctx, dir, "update-ref", "-m", "reclaimer snapshot", ref, s.Head); err != nil {
		return err
	}
	s.Ref = ref
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
