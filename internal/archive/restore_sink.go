package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// maxManifest bounds what ReadManifestFrom reads: a manifest is small, and
// a damaged or hostile object must not make it allocate without bound.
const maxManifest = 64 << 20

// ManifestName is the object name of the manifest of the archive base.
func ManifestName(base string) string { return base + ".manifest.json" }

// ReadManifestFrom reads the manifest object name from s.
func ReadManifestFrom(ctx context.Context, s sink.Sink, name string) (Manifest, error) {
	var m Manifest
	r, err := s.Open(ctx, name)
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	if err != nil {
		return m, fmt.Errorf("read manifest %s: %w", s.URL(name), err)
	}
	if len(data) > maxManifest {
		return m, fmt.Errorf("read manifest %s: larger than %d bytes", s.URL(name), maxManifest)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read manifest %s: %w", s.URL(name), err)
	}
	return m, nil
}

// VerifyIn reads every object of m back from s and checks its size and
// SHA-256: what a restore does before it trusts an archive.
func (m Manifest) VerifyIn(ctx context.Context, s sink.Sink) error {
	for _, o := range m.Objects {
		if err := VerifyObject(ctx, s, o, nil); err != nil {
			return fmt.Errorf("archive damaged: %w", err)
		}
	}
	return nil
}

func (m Manifest) object(name string) (Object, bool) {
	for _, o := range m.Objects {
		if o.Name == name {
			return o, true
		}
	}
	return Object{}, false
}

// RestoreFolders brings folders of the archive m back from s: dests maps a
// folder's name (FolderInfo.Name) to where it goes, which must not exist
// or be an empty folder. Every object is read back and checked first;
// then each tar is extracted as it streams from the sink (ExtractTar's
// rules: nothing written outside dest, no links followed) and its bytes
// checked again. A dest this call created is removed again when its
// extraction fails.
func RestoreFolders(ctx context.Context, s sink.Sink, m Manifest, dests map[string]string) error {
	if err := restoreFolders(ctx, s, m, dests); err != nil {
		return fmt.Errorf("restore folders of %s/%s: %w", m.Backend, m.Runtime, err)
	}
	return nil
}

func restoreFolders(ctx context.Context, s sink.Sink, m Manifest, dests map[string]string) error {
	type job struct {
		info FolderInfo
		obj  Object
		dest string
	}
	var jobs []job
	for name, dest := range dests {
		i := -1
		for j, f := range m.Folders {
			if f.Name == name {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("the archive holds no folder %q: %w", name, sink.ErrNotFound)
		}
		obj, ok := m.object(m.Folders[i].Object)
		if !ok {
			return fmt.Errorf("the manifest lists no object %q for folder %q", m.Folders[i].Object, name)
		}
		if !filepath.IsAbs(dest) {
			return fmt.Errorf("destination %q of folder %q is not absolute", dest, name)
		}
		if err := emptyOrAbsent(dest); err != nil {
			return err
		}
		jobs = append(jobs, job{m.Folders[i], obj, filepath.Clean(dest)})
	}
	if err := m.VerifyIn(ctx, s); err != nil {
		return err
	}
	for _, j := range jobs {
		_, statErr := os.Lstat(j.dest)
		created := errors.Is(statErr, os.ErrNotExist)
		// A restore --to a place not made yet gets its parents.
		if err := os.MkdirAll(filepath.Dir(j.dest), 0o755); err != nil {
			return fmt.Errorf("folder %s: %w", j.info.Name, err)
		}
		if err := extractFrom(ctx, s, j.obj, j.dest); err != nil {
			if created {
				os.RemoveAll(j.dest)
			}
			return fmt.Errorf("folder %s: %w", j.info.Name, err)
		}
	}
	return nil
}

func emptyOrAbsent(dest string) error {
	fi, err := os.Lstat(dest)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a folder: %w", dest, os.ErrExist)
	}
	names, err := os.ReadDir(dest)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("%s is not empty: %w", dest, os.ErrExist)
	}
	return nil
}

// extractFrom streams object o from s into dest, checking its size and
// SHA-256 once the tar is read.
func extractFrom(ctx context.Context, s sink.Sink, o Object, dest string) error {
	r, err := s.Open(ctx, o.Name)
	if err != nil {
		return err
	}
	defer r.Close()
	hc := newHashCounter()
	tee := io.TeeReader(r, hc)
	if err := extractTar(ctx, tee, dest); err != nil {
		return fmt.Errorf("extract %s into %s: %w", s.URL(o.Name), dest, err)
	}
	if _, err := sink.CopyContext(ctx, io.Discard, tee, make([]byte, copyBuf)); err != nil {
		return err
	}
	if hc.n != o.Bytes || hc.sum() != o.SHA256 {
		return fmt.Errorf("%s changed while it was restored: %w", s.URL(o.Name), ErrMismatch)
	}
	return nil
}

// RestoreWorktreeFrom brings the worktree archived in m back at dest ("":
// where it was) as a linked worktree of m.Repo: the bundle is read from s
// into a private staging file (checked against its size and SHA-256) and
// RestoreWorktree does the rest: branch, snapshot, staged and unstaged
// changes, untracked files.
func RestoreWorktreeFrom(ctx context.Context, git gitcmd.Runner, s sink.Sink, m Manifest, dest, staging string) (string, error) {
	if dest == "" {
		dest = m.Path
	}
	if err := restoreWorktreeFrom(ctx, git, s, m, dest, staging); err != nil {
		return "", fmt.Errorf("restore worktree %s/%s into %s: %w", m.Backend, m.Runtime, dest, err)
	}
	return dest, nil
}

func restoreWorktreeFrom(ctx context.Context, git gitcmd.Runner, s sink.Sink, m Manifest, dest, staging string) error {
	if m.Repo == "" || dest == "" {
		return errors.New("the manifest names no repository or worktree path")
	}
	var bundle Object
	found := false
	for _, o := range m.Objects {
		if o.Kind == KindBundle {
			bundle, found = o, true
		}
	}
	if !found {
		return fmt.Errorf("the archive holds no git bundle: %w", sink.ErrNotFound)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s exists: %w", dest, os.ErrExist)
	}
	if err := m.VerifyIn(ctx, s); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(staging, "reclaimer-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "worktree.bundle")
	if err := download(ctx, s, bundle, file); err != nil {
		return err
	}
	branch := m.Branch
	if branch == "" {
		branch = m.Head
	}
	var flags IndexFlags
	if m.IndexFlags != nil {
		flags = *m.IndexFlags
	}
	if err := restoreWorktree(ctx, git, m.Repo, file, dest, branch, m.SnapshotRef, flags); err != nil {
		return fmt.Errorf("restore worktree %s: %w", dest, err)
	}
	// The nested repositories stored whole go back where they were; the
	// ignored files (a tar of the worktree's own folder) are merged in.
	dests := map[string]string{}
	for _, f := range m.Folders {
		if f.Path == m.Path {
			if err := mergeFolder(ctx, s, m, f, dest); err != nil {
				return fmt.Errorf("restore ignored files into %s: %w", dest, err)
			}
			continue
		}
		rel, err := filepath.Rel(m.Path, f.Path)
		if err != nil || !filepath.IsLocal(rel) {
			return fmt.Errorf("nested folder %s lies outside the worktree %s", f.Path, m.Path)
		}
		dests[f.Name] = filepath.Join(dest, rel)
	}
	if len(dests) > 0 {
		if err := restoreFolders(ctx, s, m, dests); err != nil {
			return fmt.Errorf("restore nested repositories into %s: %w", dest, err)
		}
	}
	return nil
}

// download copies object o from s into file, checking size and SHA-256.
func download(ctx context.Context, s sink.Sink, o Object, file string) error {
	r, err := s.Open(ctx, o.Name)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	hc := newHashCounter()
	if _, err := sink.CopyContext(ctx, io.MultiWriter(f, hc), r, make([]byte, copyBuf)); err != nil {
		return fmt.Errorf("download %s: %w", s.URL(o.Name), err)
	}
	if hc.n != o.Bytes || hc.sum() != o.SHA256 {
		return fmt.Errorf("download %s: %w", s.URL(o.Name), ErrMismatch)
	}
	return f.Close()
}

// mergeFolder extracts folder f of m (a tar of a folder that already
// exists at dest, holding only some of its paths) beside dest and moves
// each of its entries into place: a folder dest has too is merged, anything
// else must not exist yet (ErrConflict: the restore never overwrites).
func mergeFolder(ctx context.Context, s sink.Sink, m Manifest, f FolderInfo, dest string) error {
	obj, ok := m.object(f.Object)
	if !ok {
		return fmt.Errorf("the manifest lists no object %q for folder %q", f.Object, f.Name)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), ".reclaimer-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	into := filepath.Join(tmp, "x")
	if err := extractFrom(ctx, s, obj, into); err != nil {
		return err
	}
	return mergeInto(into, dest)
}

// mergeInto moves the entries of src into dst, recursing into folders both
// have. Links are never followed.
func mergeInto(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(to)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Rename(from, to); err != nil {
				return err
			}
		case err != nil:
			return err
		case e.IsDir() && fi.IsDir():
			if err := mergeInto(from, to); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s already exists: %w", to, backend.ErrConflict)
		}
	}
	return nil
}
