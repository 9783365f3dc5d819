package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How work reached an integration branch (Integration.How).
const (
	// MergedPlainly: every commit is reachable from the branch.
	MergedPlainly = "merged"
	// MergedRebased: every commit has a twin on the branch with the same
	// patch id (git patch-id --verbatim: whitespace counts).
	MergedRebased = "rebased"
	// MergedSquashed: the work's whole change is on the branch as one
	// commit whose tree is the work merged onto its parent (a commit with
	// the work's diff is one).
	MergedSquashed = "squashed"
	// MergedIntegrated: merging the work into the branch would add
	// nothing (a squash or rebase merge the branch moved on from, in
	// files the work did not change). Tried first: it is the cheapest.
	MergedIntegrated = "integrated"
)

// Integration says where a worktree's commits already are.
type Integration struct {
	// Into is the branch that holds them, as a user names it: "main",
	// "origin/main".
	Into string `json:"into"`
	// How is MergedPlainly, MergedRebased or MergedSquashed.
	How string `json:"how"`
	// Remaining, when the work is not merged, counts its commits that are
	// in no integration branch (and on no remote).
	Remaining int `json:"remaining,omitempty"`
}

// String is what a listing shows: "merged into main", "merged into
// origin/main (squashed)".
func (i Integration) String() string {
	s := "merged into " + i.Into
	switch i.How {
	case MergedPlainly:
	case MergedIntegrated:
		s += " (merging it again would add nothing)"
	default:
		s += " (" + i.How + ")"
	}
	return s
}

// IntegrationOptions bound what Integrated may spend.
type IntegrationOptions struct {
	// Branch is the worktree's own branch (short name; "" when detached):
	// it is never an integration branch, and its upstream is one when that
	// is another local branch.
	Branch string
	// MaxCommits bounds the commits looked at on each side of the fork
	// point; beyond it nothing is proven merged. Default 1000.
	MaxCommits int
	// MaxCandidates bounds the commits of an integration branch tried as
	// the squash of the work. Default 25.
	MaxCandidates int
	// MaxPatchBytes bounds the diff text read for patch ids. Default 64 MiB.
	MaxPatchBytes int64
	// Timeout bounds the whole check (each git call is also bounded by the
	// Runner's timeout). Default 30 s.
	Timeout time.Duration
	// Scratch is a private folder for the objects a simulated merge writes
	// (the repository itself is never written). Default os.TempDir().
	Scratch string
}

func (o IntegrationOptions) withDefaults() IntegrationOptions {
	if o.MaxCommits <= 0 {
		o.MaxCommits = 1000
	}
	if o.MaxCandidates <= 0 {
		o.MaxCandidates = 25
	}
	if o.MaxPatchBytes <= 0 {
		o.MaxPatchBytes = 64 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return o
}

// ErrTooMuchHistory is wrapped by Integrated's error when the work or the
// integration branch has more commits since their fork than
// IntegrationOptions.MaxCommits: nothing is proven merged.
var ErrTooMuchHistory = errors.New("too much history to compare")

// target is one integration branch.
type target struct {
	ref, name, oid string
}

// Integrated tells whether every commit reachable from head (in the work
// tree or repository dir) and from no remote-tracking ref is already in one
// of the repository's integration branches (IntegrationBranches), tried in
// order of cost: merged plainly (reachable); a simulated merge of head
// into the branch adds nothing (MergedIntegrated); rebased (every commit
// has a twin with the same patch id, whitespace included); squashed (a
// commit whose tree is the work merged onto its parent; one with the
// work's diff is one). ok is false when any of the work cannot be found
// there (Integration.Remaining then counts the commits the nearest branch
// lacks); err is set when git could not answer, and then ok is false too:
// what cannot be proven merged is unsaved.
//
// Cost: two git processes to find the branches; per branch, two to count
// the commits on either side of the fork, and it stops there when the
// branch has not moved since the fork, or has not changed the work's
// first changed file since (the common case of work not merged: about
// seven processes in all). Otherwise a few more, and a `git log -p` of the
// commits since the fork. The history walked is bounded by opts (see
// ErrTooMuchHistory). Only the simulated merges write, and they write
// objects into a quarantine under opts.Scratch, never into the repository.
//
// The refs are the repository's word, as they are for "on a remote":
// whoever writes its .git can make a branch hold anything, but then the
// commits are in that branch, which removing a worktree leaves in place.
func (r Runner) Integrated(ctx context.Context, dir, head string, opts IntegrationOptions) (Integration, bool, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if !isObjectName(head) {
		return Integration{}, false, fmt.Errorf("check merged work of %s: %q is not a commit id", dir, head)
	}
	targets, err := r.integrationTargets(ctx, dir, opts.Branch)
	if err != nil {
		return Integration{}, false, fmt.Errorf("check merged work of %s: %w", dir, err)
	}
	return r.integratedIntoAny(ctx, dir, head, targets, opts)
}

// integratedIntoAny is Integrated once the integration branches are known.
func (r Runner) integratedIntoAny(ctx context.Context, dir, head string, targets []target, opts IntegrationOptions) (Integration, bool, error) {
	var errs []error
	remaining := -1
	for _, t := range targets {
		how, left, err := r.integratedInto(ctx, dir, head, t, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("into %s: %w", t.name, err))
			continue
		}
		if how != "" {
			return Integration{Into: t.name, How: how}, true, nil
		}
		if remaining < 0 || left < remaining {
			remaining = left
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Integration{}, false, fmt.Errorf("check merged work of %s: %w", dir, err)
	}
	if remaining < 0 {
		// No integration branch: every commit on no remote remains.
		out, err := r.Run(ctx, dir, "rev-list", "--count", head, "--not", "--remotes")
		if err != nil {
			return Integration{}, false, fmt.Errorf("check merged work of %s: %w", dir, err)
		}
		if remaining, err = strconv.Atoi(line(out)); err != nil {
			return Integration{}, false, fmt.Errorf("check merged work of %s: count commits: %w", dir, err)
		}
	}
	return Integration{Remaining: remaining}, false, nil
}

var objectName = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

func isObjectName(s string) bool { return objectName.MatchString(s) }

// safeBranchName accepts the branch names Integrated looks up by pattern:
// nothing for-each-ref would read as a glob, nothing git would refuse.
var safeBranchName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$`)

// IntegrationBranches returns the branches Integrated compares work with,
// as full refs, in order: the default branch, found as the target of a
// remote's HEAD (origin's first), else the repository's own
// init.defaultBranch, else main, else master; locally and on that remote
// when both exist. Then the upstream of branch when that is another local
// branch. The worktree's own branch is never one. Two git processes.
func (r Runner) IntegrationBranches(ctx context.Context, dir, branch string) ([]string, error) {
	ts, err := r.integrationTargets(ctx, dir, branch)
	var refs []string
	for _, t := range ts {
		refs = append(refs, t.ref)
	}
	return refs, err
}

func (r Runner) integrationTargets(ctx context.Context, dir, branch string) ([]target, error) {
	// Only the repository's own config is read (system and global are
	// off): a repository rarely sets it, so this is a weak hint.
	initial := ""
	out, err := r.Run(ctx, dir, "config", "--get", "init.defaultBranch")
	switch {
	case err == nil && safeBranchName.MatchString(line(out)):
		initial = line(out)
	case err != nil && exitStatus(err) != 1:
		return nil, fmt.Errorf("read init.defaultBranch: %w", err)
	}
	patterns := []string{"refs/remotes/*/HEAD", "refs/heads/main", "refs/heads/master",
		"refs/remotes/*/main", "refs/remotes/*/master"}
	if initial != "" {
		patterns = append(patterns, "refs/heads/"+initial, "refs/remotes/*/"+initial)
	}
	if branch != "" && safeBranchName.MatchString(branch) {
		patterns = append(patterns, "refs/heads/"+branch)
	}
	type refInfo struct{ symref, oid, upstream string }
	refs := map[string]refInfo{}
	var remoteHeads []string // refnames of refs/remotes/<r>/HEAD, origin first
	list := func(patterns []string) error {
		out, err := r.Run(ctx, dir, append([]string{"for-each-ref", "--format=%(refname)%00%(symref)%00%(objectname)%00%(upstream)"},
			patterns...)...)
		if err != nil {
			return fmt.Errorf("list default branches: %w", err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Split(l, "\x00")
			if len(f) != 4 {
				continue
			}
			refs[f[0]] = refInfo{symref: f[1], oid: f[2], upstream: f[3]}
			if strings.HasSuffix(f[0], "/HEAD") && strings.HasPrefix(f[0], "refs/remotes/") {
				if f[0] == "refs/remotes/origin/HEAD" {
					remoteHeads = append([]string{f[0]}, remoteHeads...)
				} else {
					remoteHeads = append(remoteHeads, f[0])
				}
			}
		}
		return nil
	}
	if err := list(patterns); err != nil {
		return nil, err
	}
	// The default branch's name, and the remote it came from.
	name, remote := "", "origin"
	for _, h := range remoteHeads {
		rem := strings.TrimSuffix(strings.TrimPrefix(h, "refs/remotes/"), "/HEAD")
		if n, ok := strings.CutPrefix(refs[h].symref, "refs/remotes/"+rem+"/"); ok && safeBranchName.MatchString(n) {
			name, remote = n, rem
			break
		}
	}
	if name != "" && name != initial && name != "main" && name != "master" {
		// A remote's own default ("develop"): its branches were not listed.
		if err := list([]string{"refs/heads/" + name, "refs/remotes/" + remote + "/" + name}); err != nil {
			return nil, err
		}
	}
	exists := func(ref string) bool { _, ok := refs[ref]; return ok }
	for _, n := range []string{initial, "main", "master"} {
		if name != "" {
			break
		}
		if n != "" && (exists("refs/heads/"+n) || exists("refs/remotes/"+remote+"/"+n)) {
			name = n
		}
	}
	var ts []target
	add := func(ref string) {
		info, ok := refs[ref]
		if !ok || !isObjectName(info.oid) || ref == "refs/heads/"+branch {
			return
		}
		for _, t := range ts {
			if t.ref == ref {
				return
			}
		}
		short := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/remotes/")
		ts = append(ts, target{ref: ref, name: short, oid: info.oid})
	}
	if name != "" {
		add("refs/heads/" + name)
		add("refs/remotes/" + remote + "/" + name)
	}
	if branch != "" {
		if up := refs["refs/heads/"+branch].upstream; strings.HasPrefix(up, "refs/heads/") {
			// A local upstream: for-each-ref knows it only when listed.
			out, err := r.Run(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", up+"^{commit}")
			if err == nil && isObjectName(line(out)) && up != "refs/heads/"+branch {
				short := strings.TrimPrefix(up, "refs/heads/")
				ts = append(ts, target{ref: up, name: short, oid: line(out)})
			}
		}
	}
	return ts, nil
}

// exitStatus is the exit status of a git command that ran and failed, or -1.
func exitStatus(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// integratedInto returns how head's work (its commits on no remote) is in
// t, or "" and how many of its commits t lacks when it cannot be shown to
// be.
func (r Runner) integratedInto(ctx context.Context, dir, head string, t target, opts IntegrationOptions) (string, int, error) {
	max := strconv.Itoa(opts.MaxCommits + 1)
	// The work: commits of head on no remote and not in t.
	out, err := r.Run(ctx, dir, "rev-list", "--max-count="+max, head, "--not", "--remotes", t.oid)
	if err != nil {
		return "", 0, err
	}
	work := strings.Fields(string(out))
	if len(work) == 0 {
		return MergedPlainly, 0, nil
	}
	out, err = r.Run(ctx, dir, "rev-list", "--count", t.oid, "--not", head)
	if err != nil {
		return "", 0, err
	}
	theirs, err := strconv.Atoi(line(out))
	if err != nil {
		return "", 0, fmt.Errorf("count commits of %s: %w", t.name, err)
	}
	if len(work) > opts.MaxCommits || theirs > opts.MaxCommits {
		return "", 0, fmt.Errorf("%d commits of the work, %d of %s since they forked (at most %d each): %w",
			len(work), theirs, t.name, opts.MaxCommits, ErrTooMuchHistory)
	}
	if theirs == 0 {
		// t has not moved since the fork: it cannot hold work it lacks.
		return "", len(work), nil
	}
	f, err := r.forkOf(ctx, dir, head, t)
	if err != nil || !f.related {
		return "", len(work), err
	}
	if f.first != "" && !f.touched {
		// t left the work's first changed path as it was at the fork:
		// whatever else it did, that change is not in it.
		return "", len(work), nil
	}
	q, err := r.quarantine(ctx, dir, opts.Scratch)
	if err != nil {
		return "", 0, err
	}
	defer q.close()
	if ok, err := r.addsNothing(ctx, dir, q, head, t); err != nil || ok {
		return ifTrue(ok, MergedIntegrated), 0, err
	}
	if ok, err := r.rebased(ctx, dir, head, t, work, opts); err != nil || ok {
		return ifTrue(ok, MergedRebased), 0, err
	}
	if ok, err := r.squashed(ctx, dir, q, head, t, f, opts); err != nil || ok {
		return ifTrue(ok, MergedSquashed), 0, err
	}
	return "", len(work), nil
}

// addsNothing tells whether a simulated merge of head into t (git
// merge-tree --write-tree) is clean and gives t's own tree.
func (r Runner) addsNothing(ctx context.Context, dir string, q objectQuarantine, head string, t target) (bool, error) {
	tTree, err := r.treeOf(ctx, dir, t.oid)
	if err != nil {
		return false, err
	}
	tree, clean, err := r.mergeTree(ctx, dir, q, t.oid, head)
	return err == nil && clean && tree == tTree, err
}

// fork is what the comparison of the work with t starts from.
type fork struct {
	related bool   // head and t have a merge base
	base    string // the merge base
	// first is the first path the work changed since base ("" when its
	// tree is base's), touched whether t changed it since base too.
	first   string
	touched bool
}

func (r Runner) forkOf(ctx context.Context, dir, head string, t target) (fork, error) {
	var f fork
	out, err := r.Run(ctx, dir, "merge-base", t.oid, head)
	if err != nil {
		if exitStatus(err) == 1 {
			return f, nil // unrelated histories
		}
		return f, err
	}
	f.base, f.related = line(out), true
	if !isObjectName(f.base) {
		return f, fmt.Errorf("merge-base %s %s: %q is not a commit id", t.name, head, f.base)
	}
	out, err = r.Run(ctx, dir, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-commit-id", f.base, head)
	if err != nil {
		return f, err
	}
	f.first, _, _ = strings.Cut(string(out), "\x00")
	if f.first == "" {
		return f, nil
	}
	_, err = r.RunInput(ctx, dir, nil, []string{"GIT_LITERAL_PATHSPECS=1"}, "diff-tree", "--quiet", "-r", "--no-renames",
		f.base, t.oid, "--", f.first)
	switch {
	case exitStatus(err) == 1:
		f.touched = true
	case err != nil:
		return f, err
	}
	return f, nil
}

func ifTrue(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// diffArgs pin what patch ids depend on, whatever the repository's config
// says: full binary content (without it, two different binary changes
// hash alike), no rename detection, three lines of context, one algorithm.
var diffArgs = []string{"--binary", "--no-renames", "--unified=3", "--diff-algorithm=myers", "--no-relative",
	"--ignore-submodules=none", "--src-prefix=a/", "--dst-prefix=b/"}

// patchIDs returns the patch id of each commit that `git patch-id
// --verbatim` finds in diffs. Whitespace counts: patch ids that ignore it (git cherry's)
// would call a change merged when only its indentation differs.
func (r Runner) patchIDs(ctx context.Context, dir string, diffs []byte) (map[string]string, error) {
	if len(diffs) == 0 {
		return map[string]string{}, nil
	}
	out, err := r.RunInput(ctx, dir, bytes.NewReader(diffs), nil, "patch-id", "--verbatim")
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		ids[f[1]] = f[0]
	}
	return ids, nil
}

// logPatches is `git log -p` of revs, one "commit <id>" line before each
// diff, with the pinned diff options, at most opts.MaxPatchBytes.
func (r Runner) logPatches(ctx context.Context, dir string, opts IntegrationOptions, revs ...string) ([]byte, error) {
	args := append([]string{"log", "-p", "--no-merges", "--format=commit %H"}, diffArgs...)
	g := r
	g.MaxOutput = opts.MaxPatchBytes
	return g.Run(ctx, dir, append(args, revs...)...)
}

// rebased tells whether every commit of the work has a twin in t since
// their fork point (the same patch id, whitespace included). A merge
// commit in the work has no patch id: it is never rebased work.
func (r Runner) rebased(ctx context.Context, dir, head string, t target, work []string, opts IntegrationOptions) (bool, error) {
	mine, err := r.logPatches(ctx, dir, opts, head, "--not", "--remotes", t.oid)
	if err != nil {
		return false, err
	}
	theirs, err := r.logPatches(ctx, dir, opts, t.oid, "--not", head)
	if err != nil {
		return false, err
	}
	mineIDs, err := r.patchIDs(ctx, dir, mine)
	if err != nil {
		return false, err
	}
	theirIDs, err := r.patchIDs(ctx, dir, theirs)
	if err != nil {
		return false, err
	}
	have := map[string]bool{}
	for _, id := range theirIDs {
		have[id] = true
	}
	for _, c := range work {
		id, ok := mineIDs[c]
		if !ok || !have[id] {
			return false, nil // a merge, an empty commit, or work t lacks
		}
	}
	return true, nil
}

// squashed tells whether the work's whole change is in t as one commit S
// of t since the fork point that touches the work's first changed path,
// newest first, at most opts.MaxCandidates: S (with one parent P) has the
// tree a simulated merge of head onto P gives, a squash merge made when t
// was at P, whatever t did since.
//
// A commit whose diff equals the work's (the same patch id, context lines
// included) is found by the same test: where P and the fork point differ
// the diff would differ too, so applying the work onto P is the clean
// three-way merge, and S's tree is its result.
//
// Merge drivers and filters named by the repository are switched off for
// the simulated merges (see the package documentation), so a merge is
// git's own three-way text merge; a conflict is never a match.
func (r Runner) squashed(ctx context.Context, dir string, q objectQuarantine, head string, t target, f fork, opts IntegrationOptions) (bool, error) {
	if f.first == "" {
		return false, nil // no change: the simulated merge said so already
	}
	max := "--max-count=" + strconv.Itoa(opts.MaxCandidates)
	out, err := r.RunInput(ctx, dir, nil, []string{"GIT_LITERAL_PATHSPECS=1"}, "log", "--no-merges", max,
		"--format=%H %T %P", t.oid, "--not", head, "--", f.first)
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(out), "\n") {
		w := strings.Fields(l)
		if len(w) != 3 || !isObjectName(w[1]) || !isObjectName(w[2]) {
			continue // not one parent
		}
		tree, clean, err := r.mergeTree(ctx, dir, q, w[2], head)
		if err != nil {
			return false, err
		}
		if clean && tree == w[1] {
			return true, nil
		}
	}
	return false, nil
}

func (r Runner) treeOf(ctx context.Context, dir, commit string) (string, error) {
	out, err := r.Run(ctx, dir, "rev-parse", "--verify", "--end-of-options", commit+"^{tree}")
	if err != nil {
		return "", err
	}
	return line(out), nil
}

// objectQuarantine is a private object folder the simulated merges write
// into, reading the repository's objects as alternates.
type objectQuarantine struct {
	dir string
	env []string
}

func (q objectQuarantine) close() { os.RemoveAll(q.dir) }

func (r Runner) quarantine(ctx context.Context, dir, scratch string) (objectQuarantine, error) {
	objects, err := r.GitPath(ctx, dir, "objects")
	if err != nil {
		return objectQuarantine{}, err
	}
	tmp, err := os.MkdirTemp(scratch, "reclaimer-merge-")
	if err != nil {
		return objectQuarantine{}, fmt.Errorf("make a quarantine for simulated merges: %w", err)
	}
	return objectQuarantine{dir: tmp, env: []string{"GIT_OBJECT_DIRECTORY=" + tmp, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects}}, nil
}

// mergeTree simulates merging b into a (git merge-tree --write-tree,
// git 2.38 or newer) and returns the resulting tree and whether it was
// clean.
func (r Runner) mergeTree(ctx context.Context, dir string, q objectQuarantine, a, b string) (string, bool, error) {
	out, err := r.RunInput(ctx, dir, nil, q.env, "merge-tree", "--write-tree", "--no-messages", "--name-only", a, b)
	switch {
	case exitStatus(err) == 1:
		return "", false, nil // conflicts: never "adds nothing"
	case err != nil:
		return "", false, err
	}
	tree, _, _ := strings.Cut(string(out), "\n")
	if !isObjectName(tree) {
		return "", false, fmt.Errorf("merge-tree %s %s: no tree in its output", a, b)
	}
	return tree, true, nil
}

// IntegrationCache remembers Integrated's answers by the commits they
// depend on (the work's head and each integration branch's commit): a
// daemon asks again every pass, and the answer changes only when one of
// those moves. The zero value is ready; it is safe for concurrent use.
type IntegrationCache struct {
	mu sync.Mutex
	m  map[string]cachedIntegration
}

type cachedIntegration struct {
	in Integration
	ok bool
}

// maxCached bounds the cache; past it, it starts again empty.
const maxCached = 4096

// Integrated is Runner.Integrated through the cache. The integration
// branches are looked up every time (two git processes); the comparison
// only when head or one of them moved. Errors are not cached.
func (c *IntegrationCache) Integrated(ctx context.Context, r Runner, dir, head string, opts IntegrationOptions) (Integration, bool, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if !isObjectName(head) {
		return Integration{}, false, fmt.Errorf("check merged work of %s: %q is not a commit id", dir, head)
	}
	ts, err := r.integrationTargets(ctx, dir, opts.Branch)
	if err != nil {
		return Integration{}, false, fmt.Errorf("check merged work of %s: %w", dir, err)
	}
	var key strings.Builder
	key.WriteString(dir + "\x00" + head)
	for _, t := range ts {
		key.WriteString("\x00" + t.ref + "=" + t.oid)
	}
	c.mu.Lock()
	got, hit := c.m[key.String()]
	c.mu.Unlock()
	if hit {
		return got.in, got.ok, nil
	}
	in, ok, err := r.integratedIntoAny(ctx, dir, head, ts, opts)
	if err != nil {
		return in, ok, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]cachedIntegration{}
	}
	c.m[key.String()] = cachedIntegration{in, ok}
	c.mu.Unlock()
	return in, ok, nil
}
