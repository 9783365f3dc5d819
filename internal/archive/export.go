package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/humanize"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// Kinds of Object besides KindBundle and KindTar.
const (
	KindPatch    = "patch"    // git diff --binary from the base commit to the work
	KindManifest = "manifest" // the archive's Manifest as JSON
)

// ManifestVersion is the Version of manifests Export writes.
const ManifestVersion = 2

// Request says what an export is for and where its objects go.
type Request struct {
	Sink sink.Sink
	// Base names the archive in the sink: its objects are Base.<ext>, e.g.
	// "worktree/repo:feature/20260101T120000Z.bundle", and its manifest
	// Base.manifest.json. Use ObjectBase.
	Base          string
	Runtime       string
	Backend       string
	Conversations []string
	CreatedAt     time.Time
	// Staging is a local folder for what git must write to a file (the
	// bundle, the patch) before it is stored; default os.TempDir(). Those
	// files are removed when the export ends.
	Staging string
	// IncludeDependencies keeps the rebuildable dependency folders in
	// tars instead of listing them as left out.
	IncludeDependencies bool
	// NotKept says in plain words what of the runtime the archive leaves
	// out beyond dependencies (a container's home and writable layer),
	// for the survives list.
	NotKept []string
	// Snapshots are volume snapshots the backend took and saw ready (a
	// Kubernetes runtime's volumes): the archive's manifest records them,
	// and they are its content.
	Snapshots []VolumeSnapshot
}

// VolumeSnapshot is one Kubernetes VolumeSnapshot an archive consists of,
// with what a new claim restored from it needs.
type VolumeSnapshot struct {
	Namespace string `json:"namespace"`
	// Name is the VolumeSnapshot; Volume the claim it was taken of.
	Name   string `json:"name"`
	Volume string `json:"volume"`
	Class  string `json:"class,omitempty"`
	// Content is the bound VolumeSnapshotContent, RestoreSize the
	// smallest claim it restores into.
	Content     string `json:"content,omitempty"`
	RestoreSize string `json:"restore_size,omitempty"`
	// The claim's own settings, for the restored one.
	StorageClass string   `json:"storage_class,omitempty"`
	AccessModes  []string `json:"access_modes,omitempty"`
	Requested    string   `json:"requested,omitempty"`
}

// ObjectBase is the Request.Base of an archive of runtime id on backend at
// t: "<backend>/<runtime>/<UTC timestamp>", each part one path segment.
func ObjectBase(backendName, id string, t time.Time) string {
	return safeSegment(backendName) + "/" + safeSegment(id) + "/" + t.UTC().Format("20060102T150405Z")
}

// safeSegment makes s usable as one segment of an object name.
func safeSegment(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, s)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// Folder is one folder an export stores as a tar.zst: a run folder, or a
// container's mounted home or workspace.
type Folder struct {
	// Name names the object (Base.<Name>.tar.zst) and the folder in
	// RestoreFolders: "run", "home", "workspace".
	Name string `json:"name"`
	// Path is the folder, absolute.
	Path string `json:"path"`
	// Dependencies are rebuildable folders below Path (absolute; the
	// git-ignored dependency folders a backend selects), left out unless
	// Request.IncludeDependencies.
	Dependencies []string `json:"-"`
	// Leave are files and folders below Path (absolute) that are never
	// stored, whatever IncludeDependencies says: a home's caches and core
	// dumps. They are named in the manifest's Excluded list.
	Leave []string `json:"-"`
}

// Dependency is a rebuildable folder: left out of the archive by default,
// listed with the lock files that rebuild it.
type Dependency struct {
	Folder string `json:"folder,omitempty"` // Folder.Name; "" for a worktree
	Path   string `json:"path"`             // relative to the folder or worktree
	// LockFiles are the lock or manifest files beside it (relative paths)
	// that say how to rebuild it.
	LockFiles []string `json:"lock_files,omitempty"`
	Kept      bool     `json:"kept"`
}

// FolderInfo is what the archive holds of one Folder.
type FolderInfo struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Object   string    `json:"object"` // the tar's object name
	Files    int       `json:"files"`
	Dirs     int       `json:"dirs"`
	Symlinks int       `json:"symlinks"`
	Bytes    int64     `json:"bytes"` // file content, uncompressed
	Skipped  []Skipped `json:"skipped,omitempty"`
}

// lockFileNames are the files beside a dependency folder that tell how to
// rebuild it, by the folder's name; other folders get any of them.
var lockFileNames = map[string][]string{
	"node_modules":     {"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock", "bun.lockb", "package.json"},
	".venv":            pythonLocks,
	"venv":             pythonLocks,
	"target":           {"Cargo.lock", "Cargo.toml", "pom.xml"},
	"vendor":           {"go.sum", "go.mod", "Gemfile.lock", "composer.lock"},
	".gradle":          {"gradle.lockfile", "build.gradle", "build.gradle.kts"},
	"bower_components": {"bower.json"},
}

var pythonLocks = []string{"uv.lock", "poetry.lock", "Pipfile.lock", "pdm.lock", "requirements.txt", "pyproject.toml"}

// lockFiles lists the lock files beside dep (absolute), relative to root.
func lockFiles(root, dep string) []string {
	names, ok := lockFileNames[filepath.Base(dep)]
	if !ok {
		for _, list := range lockFileNames {
			names = append(names, list...)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	var out []string
	dir := filepath.Dir(dep)
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(root, filepath.Join(dir, name))
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// exporter writes the objects of one archive and removes them again when
// the export fails.
type exporter struct {
	req     Request
	objects []Object
	entries map[string][]TarEntry // object name -> what its tar must hold
	staging string
}

func newExporter(req Request) (*exporter, error) {
	if req.Sink == nil {
		return nil, errors.New("no sink")
	}
	if err := sink.CheckName(req.Base); err != nil {
		return nil, err
	}
	if req.CreatedAt.IsZero() {
		req.CreatedAt = time.Now()
	}
	req.CreatedAt = req.CreatedAt.UTC()
	return &exporter{req: req, entries: map[string][]TarEntry{}}, nil
}

func (x *exporter) name(ext string) string { return x.req.Base + "." + ext }

// stagingDir makes the private staging folder on first use.
func (x *exporter) stagingDir() (string, error) {
	if x.staging == "" {
		dir, err := os.MkdirTemp(x.req.Staging, "reclaimer-export-")
		if err != nil {
			return "", err
		}
		x.staging = dir
	}
	return x.staging, nil
}

func (x *exporter) close() {
	if x.staging != "" {
		os.RemoveAll(x.staging)
	}
}

// abandon removes every object stored so far: a failed export leaves
// nothing in the sink.
func (x *exporter) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range x.objects {
		_ = x.req.Sink.Remove(ctx, o.Name)
	}
	_ = x.req.Sink.Remove(ctx, x.name("manifest.json"))
}

// hashCounter hashes and counts what passes through it.
type hashCounter struct {
	h hash.Hash
	n int64
}

func newHashCounter() *hashCounter { return &hashCounter{h: sha256.New()} }

func (c *hashCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func (c *hashCounter) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }

// put stores what r yields as object name.
func (x *exporter) put(ctx context.Context, kind, name string, r io.Reader) (Object, error) {
	hc := newHashCounter()
	n, err := x.req.Sink.Put(ctx, name, io.TeeReader(r, hc))
	obj := Object{Kind: kind, Name: name, Bytes: hc.n, SHA256: hc.sum()}
	x.objects = append(x.objects, obj) // removed by abandon even when half written
	if err != nil {
		return obj, err
	}
	if n != hc.n {
		return obj, fmt.Errorf("store %s: the sink took %d bytes of %d", name, n, hc.n)
	}
	return obj, nil
}

// putFile stores a local file.
func (x *exporter) putFile(ctx context.Context, kind, name, file string) (Object, error) {
	f, err := os.Open(file)
	if err != nil {
		return Object{}, err
	}
	defer f.Close()
	return x.put(ctx, kind, name, f)
}

// putTar streams a tar.zst of folder into the sink: the tar is written
// into a pipe the sink reads, so nothing of it is staged locally.
func (x *exporter) putTar(ctx context.Context, f Folder, opts TarOptions) (Object, TarStats, error) {
	name := x.name(f.Name + ".tar.zst")
	pr, pw := io.Pipe()
	type result struct {
		st  TarStats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := WriteTar(ctx, f.Path, pw, opts)
		pw.CloseWithError(err)
		done <- result{st, err}
	}()
	obj, err := x.put(ctx, KindTar, name, pr)
	pr.CloseWithError(errors.New("the sink stopped reading")) // unblocks the writer if the sink failed
	res := <-done
	// The sink's error first: when the tar failed, the sink read that
	// error and says it too; when the sink failed, the tar only says
	// that the sink stopped reading.
	if err != nil {
		return obj, res.st, err
	}
	if res.err != nil {
		return obj, res.st, res.err
	}
	obj.Root = f.Path
	x.objects[len(x.objects)-1] = obj
	x.entries[name] = res.st.Entries
	return obj, res.st, nil
}

// verify reads every object back from the sink and checks its size and
// SHA-256; a tar is decompressed on the same read and checked entry by
// entry against what was written.
func (x *exporter) verify(ctx context.Context) error {
	for _, o := range x.objects {
		if err := VerifyObject(ctx, x.req.Sink, o, x.entries[o.Name]); err != nil {
			return err
		}
	}
	return nil
}

// VerifyObject reads o back from s and checks its size and SHA-256; with
// entries, o is a tar.zst that must hold exactly those entries.
func VerifyObject(ctx context.Context, s sink.Sink, o Object, entries []TarEntry) error {
	r, err := s.Open(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("verify %s: %w", o.Name, err)
	}
	defer r.Close()
	hc := newHashCounter()
	tee := io.TeeReader(r, hc)
	if entries != nil {
		err = verifyTar(ctx, s.URL(o.Name), tee, entries)
	}
	if err == nil {
		_, err = sink.CopyContext(ctx, io.Discard, tee, make([]byte, copyBuf))
	}
	if err != nil {
		return fmt.Errorf("verify %s: %w", s.URL(o.Name), err)
	}
	if hc.n != o.Bytes || hc.sum() != o.SHA256 {
		return fmt.Errorf("verify %s: read back %d bytes with sha256 %s, stored %d bytes with sha256 %s: %w",
			s.URL(o.Name), hc.n, hc.sum(), o.Bytes, o.SHA256, ErrMismatch)
	}
	return nil
}

// finish verifies every object, then stores the manifest and reads it
// back too.
func (x *exporter) finish(ctx context.Context, m *Manifest) error {
	if err := x.verify(ctx); err != nil {
		return err
	}
	m.Version = ManifestVersion
	m.Runtime, m.Backend = x.req.Runtime, x.req.Backend
	m.Conversations = x.req.Conversations
	m.CreatedAt = x.req.CreatedAt
	m.IncludeDependencies = x.req.IncludeDependencies
	m.Objects = slices.Clone(x.objects)
	m.Formats, m.Bytes = nil, 0
	for _, o := range m.Objects {
		if !slices.Contains(m.Formats, o.Kind) {
			m.Formats = append(m.Formats, o.Kind)
		}
		m.Bytes += o.Bytes
	}
	m.Name = x.req.Base
	m.Location = x.req.Sink.URL(x.name("manifest.json"))
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	obj, err := x.put(ctx, KindManifest, x.name("manifest.json"), strings.NewReader(string(data)+"\n"))
	if err != nil {
		return err
	}
	x.objects = x.objects[:len(x.objects)-1] // the manifest is not one of its own objects
	return VerifyObject(ctx, x.req.Sink, obj, nil)
}

// ExportFolders stores each folder as a tar.zst (dependency folders left
// out unless req.IncludeDependencies), reads every object back from the
// sink, and stores the manifest last. On error whatever was stored is
// removed again and the folders are as they were: nothing here writes to
// them. This is the export of run folders and of a container's mounted
// folders.
func ExportFolders(ctx context.Context, req Request, folders []Folder) (Manifest, error) {
	m, err := exportFolders(ctx, req, folders)
	if err != nil {
		return Manifest{}, fmt.Errorf("export %s/%s: %w", req.Backend, req.Runtime, err)
	}
	return m, nil
}

func exportFolders(ctx context.Context, req Request, folders []Folder) (Manifest, error) {
	x, err := newExporter(req)
	if err != nil {
		return Manifest{}, err
	}
	defer x.close()
	var m Manifest
	if err := x.addFolders(ctx, &m, folders); err != nil {
		x.abandon()
		return Manifest{}, err
	}
	if err := x.finish(ctx, &m); err != nil {
		x.abandon()
		return Manifest{}, err
	}
	return m, nil
}

func (x *exporter) addFolders(ctx context.Context, m *Manifest, folders []Folder) error {
	seen := map[string]bool{}
	for _, f := range folders {
		if f.Name == "" || seen[f.Name] || sink.CheckName(f.Name) != nil || strings.Contains(f.Name, "/") {
			return fmt.Errorf("folder name %q: empty, repeated or not one segment", f.Name)
		}
		seen[f.Name] = true
		var skip []string
		for _, d := range f.Dependencies {
			rel, err := filepath.Rel(f.Path, d)
			if err != nil || !filepath.IsLocal(rel) {
				continue
			}
			rel = filepath.ToSlash(rel)
			m.Dependencies = append(m.Dependencies, Dependency{Folder: f.Name, Path: rel,
				LockFiles: lockFiles(f.Path, d), Kept: x.req.IncludeDependencies})
			skip = append(skip, rel)
		}
		if x.req.IncludeDependencies {
			skip = nil
		}
		var leave []string
		for _, l := range f.Leave {
			if rel, err := filepath.Rel(f.Path, l); err == nil && filepath.IsLocal(rel) {
				leave = append(leave, filepath.ToSlash(rel))
				m.Excluded = append(m.Excluded, path.Join(f.Name, filepath.ToSlash(rel))+" (a cache, a core dump or a home left out: not kept)")
			}
		}
		opts := TarOptions{}
		if len(skip) > 0 || len(leave) > 0 {
			opts.Exclude = func(rel string, isDir bool) bool {
				return (isDir && slices.Contains(skip, rel)) || slices.Contains(leave, rel)
			}
		}
		obj, st, err := x.putTar(ctx, f, opts)
		if err != nil {
			return fmt.Errorf("store folder %s (%s): %w", f.Name, f.Path, err)
		}
		m.Folders = append(m.Folders, FolderInfo{Name: f.Name, Path: f.Path, Object: obj.Name, Files: st.Files,
			Dirs: st.Dirs, Symlinks: st.Symlinks, Bytes: st.Bytes, Skipped: st.Skipped})
		m.Survives = append(m.Survives, fmt.Sprintf("%s (%s): %s, %s, %s, %s", f.Name, f.Path,
			plural(st.Files, "file", "files"), plural(st.Dirs, "folder", "folders"),
			plural(st.Symlinks, "link", "links"), bytesText(st.Bytes)))
		for _, s := range st.Skipped {
			m.Excluded = append(m.Excluded, path.Join(f.Name, s.Path)+" ("+s.Reason+", not stored)")
		}
	}
	m.Survives = append(m.Survives, dependencySurvives(m.Dependencies, x.req.IncludeDependencies)...)
	for _, v := range x.req.Snapshots {
		m.Snapshots = append(m.Snapshots, v)
		m.Survives = append(m.Survives, fmt.Sprintf("volume %s: VolumeSnapshot %s/%s (restore size %s), ready to use",
			v.Volume, v.Namespace, v.Name, v.RestoreSize))
	}
	for _, n := range x.req.NotKept {
		m.Survives = append(m.Survives, n+" NOT kept")
	}
	return nil
}

// dependencySurvives says in plain words what happened to the dependency
// folders.
func dependencySurvives(deps []Dependency, kept bool) []string {
	if len(deps) == 0 {
		return nil
	}
	var names []string
	for _, d := range deps {
		n := d.Path
		if d.Folder != "" {
			n = d.Folder + "/" + d.Path
		}
		names = append(names, n)
	}
	list := joinAnd(names)
	if kept {
		return []string{list + " kept (include_dependencies = true)"}
	}
	return []string{list + " NOT kept (rebuildable, listed in the manifest with their lock files)"}
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func bytesText(n int64) string { return humanize.Bytes(n) }

// Worktree is what ExportWorktree needs of a git worktree.
type Worktree struct {
	Path string // the worktree
	Repo string // its main worktree (where the bundle is made and restored)
	// Ref is the snapshot ref to write, under refs/reclaimer/.
	Ref string
	// Dependencies are its rebuildable git-ignored folders (absolute):
	// never in the bundle or patch (git ignores them); listed with their
	// lock files.
	Dependencies []string
}

// ExportWorktree stores a worktree as a git bundle (its branch, or its
// detached HEAD, plus a snapshot commit of uncommitted and untracked work)
// and a patch from the base commit (where the work left what is on a
// remote, or the main worktree's branch) to the snapshot, reads both back
// from the sink, and stores the manifest last. On error whatever was
// stored is removed again; the worktree, its index and branch are never
// changed (SnapshotWorktree only adds objects and the ref).
func ExportWorktree(ctx context.Context, git gitcmd.Runner, req Request, wt Worktree) (Manifest, error) {
	m, err := exportWorktree(ctx, git, req, wt)
	if err != nil {
		return Manifest{}, fmt.Errorf("export %s/%s: %w", req.Backend, req.Runtime, err)
	}
	return m, nil
}

func exportWorktree(ctx context.Context, git gitcmd.Runner, req Request, wt Worktree) (Manifest, error) {
	x, err := newExporter(req)
	if err != nil {
		return Manifest{}, err
	}
	defer x.close()
	m, err := x.addWorktree(ctx, git, wt)
	if err == nil {
		err = x.finish(ctx, &m)
	}
	if err != nil {
		x.abandon()
		// An abandoned export leaves nothing in the user's repository
		// either: its snapshot refs go (even when ctx was canceled).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := DropSnapshotRefs(dctx, git, wt.Path, wt.Ref); derr != nil {
			err = errors.Join(err, derr)
		}
		return Manifest{}, err
	}
	return m, nil
}

// DropSnapshotRefs removes the refs an export of a worktree wrote under
// ref (the snapshot, and ref-head for a detached HEAD), when they exist:
// an export that was abandoned (failed, or interrupted by a crash and
// found at the next start) keeps a ref only for an archive the ledger
// recorded. dir is the worktree or its repository.
func DropSnapshotRefs(ctx context.Context, git gitcmd.Runner, dir, ref string) error {
	if !strings.HasPrefix(ref, SnapshotRefPrefix) {
		return fmt.Errorf("drop snapshot refs: %q is not under %s", ref, SnapshotRefPrefix)
	}
	out, err := git.Run(ctx, dir, "for-each-ref", "--format=%(refname)", ref, ref+"-head")
	if err != nil {
		return fmt.Errorf("drop snapshot refs %s: %w", ref, err)
	}
	for _, r := range strings.Fields(string(out)) {
		if r != ref && r != ref+"-head" {
			continue
		}
		if _, err := git.Run(ctx, dir, "update-ref", "-d", r); err != nil {
			return fmt.Errorf("drop snapshot ref %s: %w", r, err)
		}
	}
	return nil
}

func (x *exporter) addWorktree(ctx context.Context, git gitcmd.Runner, wt Worktree) (Manifest, error) {
	var m Manifest
	snap, err := SnapshotWorktree(ctx, git, wt.Path, wt.Ref)
	if err != nil {
		return m, err
	}
	if snap.Head == "" {
		return m, fmt.Errorf("worktree %s has no commit yet: %w", wt.Path, errors.ErrUnsupported)
	}
	var refs []string
	if snap.Branch != "" {
		refs = append(refs, "refs/heads/"+snap.Branch)
	} else {
		// Detached: keep the commit reachable through our own ref.
		headRef := wt.Ref + "-head"
		if _, err := git.Run(ctx, wt.Path, "update-ref", headRef, snap.Head); err != nil {
			return m, err
		}
		refs = append(refs, headRef)
		m.HeadRef = headRef
	}
	if snap.Commit != "" {
		refs = append(refs, wt.Ref)
		m.SnapshotRef = wt.Ref
	}
	staging, err := x.stagingDir()
	if err != nil {
		return m, err
	}
	bundleFile := filepath.Join(staging, "worktree.bundle")
	if _, err := WriteBundle(ctx, git, wt.Repo, bundleFile, refs); err != nil {
		return m, err
	}
	if _, err := x.putFile(ctx, KindBundle, x.name("bundle"), bundleFile); err != nil {
		return m, err
	}
	tip := snap.Head
	if snap.Commit != "" {
		tip = snap.Commit
	}
	base, err := baseCommit(ctx, git, wt, snap)
	if err != nil {
		return m, err
	}
	if base != "" {
		patchFile := filepath.Join(staging, "worktree.patch")
		// --output: git writes the file itself, so a large binary change
		// never passes through this process's memory.
		if _, err := git.Run(ctx, wt.Path, "diff", "--binary", "--full-index", "--no-ext-diff", "--no-textconv",
			"--no-color", "--no-renames", "--output="+patchFile, base, tip); err != nil {
			return m, fmt.Errorf("write patch: %w", err)
		}
		if _, err := x.putFile(ctx, KindPatch, x.name("patch"), patchFile); err != nil {
			return m, err
		}
	}
	m.Repo, m.Path = wt.Repo, wt.Path
	m.Base, m.Head, m.Branch, m.Snapshot, m.Remote = base, snap.Head, snap.Branch, snap.Commit, snap.Remote
	if !snap.Flags.empty() {
		flags := snap.Flags
		m.IndexFlags = &flags
		m.Survives = append(m.Survives, plural(len(flags.AssumeUnchanged)+len(flags.SkipWorktree), "index flag", "index flags")+
			" (assume-unchanged, skip-worktree), set again on restore")
	}
	if snap.Branch != "" {
		s := "branch " + snap.Branch
		if snap.Unpushed > 0 {
			s += " with " + plural(snap.Unpushed, "commit", "commits") + " not on any remote"
		}
		m.Survives = append(m.Survives, s)
	} else {
		m.Survives = append(m.Survives, "detached HEAD "+snap.Head)
	}
	if snap.Changed > 0 {
		m.Survives = append(m.Survives, "uncommitted changes to "+plural(snap.Changed, "file", "files"))
	}
	if snap.Untracked > 0 {
		m.Survives = append(m.Survives, plural(snap.Untracked, "untracked file", "untracked files"))
	}
	if base != "" {
		m.Survives = append(m.Survives, "a patch of all of it against base "+short(base))
	}
	for _, d := range wt.Dependencies {
		rel, err := filepath.Rel(wt.Path, d)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		m.Dependencies = append(m.Dependencies, Dependency{Path: filepath.ToSlash(rel), LockFiles: lockFiles(wt.Path, d)})
	}
	// A worktree's archive is git's view of it: dependency folders are
	// ignored by git, so they are never kept, whatever include_dependencies says.
	m.Survives = append(m.Survives, dependencySurvives(m.Dependencies, false)...)
	// Ignored files that are not rebuildable dependencies (.env, secrets/,
	// Terraform state) are what a user wants back most: one tar of just
	// those paths, merged back into the restored worktree.
	keep, err := ignoredToKeep(ctx, git, wt)
	if err != nil {
		return m, err
	}
	if len(keep) > 0 {
		f := Folder{Name: "ignored", Path: wt.Path}
		obj, st, err := x.putTar(ctx, f, TarOptions{Exclude: keepOnly(keep)})
		if err != nil {
			return m, fmt.Errorf("store ignored files: %w", err)
		}
		m.Folders = append(m.Folders, FolderInfo{Name: f.Name, Path: f.Path, Object: obj.Name, Files: st.Files,
			Dirs: st.Dirs, Symlinks: st.Symlinks, Bytes: st.Bytes, Skipped: st.Skipped})
		m.Survives = append(m.Survives, fmt.Sprintf("ignored files that are not dependencies (%s): %s, %s",
			strings.Join(keep[:min(len(keep), 3)], ", "), plural(st.Files, "file", "files"), bytesText(st.Bytes)))
		for _, sk := range st.Skipped {
			m.Excluded = append(m.Excluded, sk.Path+" ("+sk.Reason+", not stored)")
		}
	}
	// Untracked nested repositories (clones the agent made): a snapshot
	// commit cannot hold them, so each is stored whole as a tar, its .git
	// with every commit, branch, index and uncommitted file included, and
	// extracted back into place on restore.
	for i, n := range snap.Nested {
		rel := strings.TrimSuffix(n, "/")
		f := Folder{Name: fmt.Sprintf("nested-%d", i), Path: filepath.Join(wt.Path, filepath.FromSlash(rel))}
		obj, st, err := x.putTar(ctx, f, TarOptions{})
		if err != nil {
			return m, fmt.Errorf("store nested repository %s: %w", rel, err)
		}
		m.Folders = append(m.Folders, FolderInfo{Name: f.Name, Path: f.Path, Object: obj.Name, Files: st.Files,
			Dirs: st.Dirs, Symlinks: st.Symlinks, Bytes: st.Bytes, Skipped: st.Skipped})
		m.Survives = append(m.Survives, "untracked nested repository "+rel+" (whole, its .git included)")
		for _, sk := range st.Skipped {
			m.Excluded = append(m.Excluded, path.Join(rel, sk.Path)+" ("+sk.Reason+", not stored)")
		}
	}
	return m, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// baseCommit is the commit the work started from: the merge base with the
// branch's upstream, else with every remote-tracking branch, else with the
// main worktree's HEAD; "" when there is none (a repository of one branch
// and no remote), and then there is no patch.
func baseCommit(ctx context.Context, git gitcmd.Runner, wt Worktree, snap Snapshot) (string, error) {
	try := func(args ...string) string {
		dir := wt.Path
		if args[0] == "-C" {
			dir, args = args[1], args[2:]
		}
		out, err := git.Run(ctx, dir, args...)
		if err != nil {
			return ""
		}
		return gitLine(out)
	}
	if snap.Branch != "" {
		if up := try("rev-parse", "--verify", "-q", snap.Branch+"@{upstream}"); up != "" {
			if b := try("merge-base", snap.Head, up); b != "" {
				return b, nil
			}
		}
	}
	if remotes := strings.Fields(try("for-each-ref", "--format=%(objectname)", "refs/remotes")); len(remotes) > 0 {
		if b := try(append([]string{"merge-base", snap.Head}, remotes...)...); b != "" {
			return b, nil
		}
	}
	if main := try("-C", wt.Repo, "rev-parse", "--verify", "-q", "HEAD^{commit}"); main != "" {
		if b := try("merge-base", snap.Head, main); b != "" {
			return b, nil
		}
	}
	return "", nil
}

// BackendExport is what an Exporter returns for the archive m.
func (m Manifest) BackendExport() backend.Export {
	data, _ := json.Marshal(m)
	exp := backend.Export{Location: m.Location, Formats: m.Formats, Bytes: m.Bytes, Survives: m.Survives,
		Restore: "reclaimer restore " + m.Runtime, Manifest: data}
	for _, o := range m.Objects {
		exp.Objects = append(exp.Objects, backend.ArchiveObject{Name: o.Name, Bytes: o.Bytes, SHA256: o.SHA256})
	}
	return exp
}

// ParseManifest reads a manifest recorded in the ledger (backend.Export's
// Manifest); it must be one Export wrote.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("parse manifest: %w", err)
	}
	// An archive may hold no object at all (a container whose workspaces
	// all lie outside the managed roots): its manifest says what was not
	// kept. Manifests before ManifestVersion cannot be restored.
	if m.Version < ManifestVersion {
		return m, fmt.Errorf("parse manifest: not a manifest of a stored archive (version %d, %d objects): %w",
			m.Version, len(m.Objects), errors.ErrUnsupported)
	}
	return m, nil
}

// ignoredToKeep lists the worktree's ignored paths (git's own top-most
// matches: "dir/" for a folder) that are not inside a rebuildable
// dependency folder of wt.Dependencies.
func ignoredToKeep(ctx context.Context, git gitcmd.Runner, wt Worktree) ([]string, error) {
	es, err := git.StatusPorcelainV2(ctx, wt.Path, true)
	if err != nil {
		return nil, fmt.Errorf("list ignored files: %w", err)
	}
	var keep []string
	for _, e := range es {
		if e.Kind != gitcmd.Ignored {
			continue
		}
		rel := strings.TrimSuffix(e.Path, "/")
		abs := filepath.Join(wt.Path, filepath.FromSlash(rel))
		dep := slices.ContainsFunc(wt.Dependencies, func(d string) bool {
			return abs == d || strings.HasPrefix(abs, d+string(filepath.Separator))
		})
		if !dep && filepath.IsLocal(rel) {
			keep = append(keep, e.Path)
		}
	}
	return keep, nil
}

// keepOnly is a TarOptions.Exclude that keeps only the paths of keep
// ("dir/" keeps a folder whole) and the folders leading to them.
func keepOnly(keep []string) func(rel string, isDir bool) bool {
	return func(rel string, isDir bool) bool {
		for _, k := range keep {
			dir := strings.HasSuffix(k, "/")
			k = strings.TrimSuffix(k, "/")
			switch {
			case rel == k, dir && strings.HasPrefix(rel, k+"/"):
				return false // kept, or inside a kept folder
			case isDir && strings.HasPrefix(k, rel+"/"):
				return false // on the way to a kept path
			}
		}
		return true
	}
}
