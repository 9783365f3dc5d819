package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/reclaimer/reclaimer/internal/sink"
)

// Kinds of Object.
const (
	KindBundle = "git-bundle" // a self-contained git bundle (WriteBundle)
	KindTar    = "tar.zst"    // a zstd-compressed tar of a folder (WriteTarFile)
)

// ErrMismatch reports that an archive read back differs from what was
// written: a corrupt, truncated or swapped file.
var ErrMismatch = errors.New("archive does not match what was written")

// Object is one file of an archive as it was written and fsynced.
type Object struct {
	// Kind is KindBundle or KindTar ("" for anything else).
	Kind string `json:"kind,omitempty"`
	// Name is the object's name in its sink (archives written by Export).
	Name string `json:"name,omitempty"`
	// Path is where a local object file is (WriteTarFile, WriteBundle). In
	// a manifest file it is stored relative to the manifest's folder when
	// it lies in that folder.
	Path   string `json:"path,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // hex of the whole file
	// Root is the folder a tar object was made of ("" for a bundle).
	Root string `json:"root,omitempty"`
}

// Verify re-reads the object's file and checks its size and SHA-256.
func (o Object) Verify(ctx context.Context) error {
	f, err := os.Open(o.Path)
	if err != nil {
		return fmt.Errorf("verify object: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := sink.CopyContext(ctx, h, f, make([]byte, copyBuf))
	if err != nil {
		return fmt.Errorf("verify object %s: %w", o.Path, err)
	}
	if n != o.Bytes || hex.EncodeToString(h.Sum(nil)) != o.SHA256 {
		return fmt.Errorf("verify object %s: %d bytes, want %d, or sha256 differs: %w", o.Path, n, o.Bytes, ErrMismatch)
	}
	return nil
}

// Manifest describes one archive: what it holds, where it came from and
// what survives of the runtime. It is stored as <name>.manifest.json beside
// the objects.
type Manifest struct {
	// Version is ManifestVersion for archives written by Export; 0 for the
	// local manifests of WriteManifest.
	Version       int       `json:"version,omitempty"`
	Runtime       string    `json:"runtime"`
	Backend       string    `json:"backend"`
	Conversations []string  `json:"conversations,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// Name is the archive's name in its sink (Request.Base): its objects
	// are Name.<ext> and its manifest ManifestName(Name).
	Name string `json:"name,omitempty"`
	// Location is where the manifest itself is stored (a path or an
	// s3:// URL).
	Location string `json:"location,omitempty"`
	// Formats are the kinds of the objects, in order; Bytes their total.
	Formats []string `json:"formats,omitempty"`
	Bytes   int64    `json:"bytes,omitempty"`
	Objects []Object `json:"objects"`
	// Repo is the main worktree of the repository and Path the worktree
	// that was archived.
	Repo string `json:"repo,omitempty"`
	Path string `json:"path,omitempty"`
	// Base is the commit the patch starts from; Head the commit the
	// worktree was at; Branch its branch ("" when detached); Snapshot the
	// commit holding uncommitted and untracked work ("" when there was
	// none) and SnapshotRef the ref pointing at it; HeadRef the ref that
	// keeps a detached HEAD; Remote the upstream remote's URL.
	Base        string `json:"base,omitempty"`
	Head        string `json:"head,omitempty"`
	Branch      string `json:"branch,omitempty"`
	Snapshot    string `json:"snapshot,omitempty"`
	SnapshotRef string `json:"snapshot_ref,omitempty"`
	HeadRef     string `json:"head_ref,omitempty"`
	Remote      string `json:"remote,omitempty"`
	// IndexFlags are the assume-unchanged and skip-worktree entries a
	// restore marks again.
	IndexFlags *IndexFlags `json:"index_flags,omitempty"`
	// Folders are the folders stored as tars.
	Folders []FolderInfo `json:"folders,omitempty"`
	// Snapshots are the volume snapshots holding a Kubernetes runtime's
	// volumes; they live in the cluster, not in the sink.
	Snapshots []VolumeSnapshot `json:"snapshots,omitempty"`
	// Dependencies are the rebuildable folders, kept or not, with the
	// lock files that rebuild them.
	Dependencies        []Dependency `json:"dependencies,omitempty"`
	IncludeDependencies bool         `json:"include_dependencies,omitempty"`
	// Survives says in plain words what the archive keeps.
	Survives []string `json:"survives,omitempty"`
	// Excluded names what was deliberately left out (ignored files,
	// nested repositories, mount points).
	Excluded []string `json:"excluded,omitempty"`
	// Image is a provider image holding the runtime's filesystem, kept by
	// the provider rather than the sink (a Modal filesystem snapshot).
	Image string `json:"image,omitempty"`
	// Restore, when set, is how the archive is brought back by hand (a
	// command starting a sandbox from Image).
	Restore string `json:"restore,omitempty"`
}

// ManifestPath is the manifest file of the archive name in dir.
func ManifestPath(dir, name string) string {
	return filepath.Join(dir, name+".manifest.json")
}

// WriteManifest writes m as JSON to path atomically (temp file, fsync,
// rename, fsync of the folder). Object paths inside path's folder are
// stored relative to it, so the folder can be moved as a whole.
func WriteManifest(path string, m Manifest) error {
	dir := filepath.Dir(path)
	objs := make([]Object, len(m.Objects))
	for i, o := range m.Objects {
		if abs, err := filepath.Abs(o.Path); err == nil {
			if rel, err := filepath.Rel(dir, abs); err == nil && filepath.IsLocal(rel) {
				o.Path = rel
			}
		}
		objs[i] = o
	}
	m.Objects = objs
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	data = append(data, '\n')
	_, err = writeAtomic(context.Background(), path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// ReadManifest reads a manifest written by WriteManifest. Relative object
// paths are resolved against the manifest's folder.
func ReadManifest(path string) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read manifest %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range m.Objects {
		if m.Objects[i].Path != "" && !filepath.IsAbs(m.Objects[i].Path) {
			m.Objects[i].Path = filepath.Join(dir, m.Objects[i].Path)
		}
	}
	return m, nil
}

// copyBuf is the size of the one buffer a copy uses: memory never grows
// with the size of what is copied.
const copyBuf = 256 << 10

// writeAtomic creates path through a temporary file beside it: write calls
// fill it, then it is fsynced, renamed into place and the folder fsynced.
// A crash leaves either the old file (or none) or the whole new one, plus
// at worst a stray ".tmp-" file. It returns the object written.
func writeAtomic(ctx context.Context, path string, write func(w io.Writer) error) (Object, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return Object{}, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	if err := write(cw); err != nil {
		return Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return Object{}, err
	}
	if err := tmp.Sync(); err != nil {
		return Object{}, err
	}
	if err := tmp.Close(); err != nil {
		return Object{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Object{}, err
	}
	done = true
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Object{}, err
	}
	return Object{Path: path, Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// hashFile fsyncs path and returns its size and SHA-256.
func hashFile(ctx context.Context, path string) (int64, string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err := sink.CopyContext(ctx, h, f, make([]byte, copyBuf))
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// Verify reads back every object of the manifest and checks its size and
// SHA-256: what a restore does before it trusts an archive.
func (m Manifest) Verify(ctx context.Context) error {
	for _, o := range m.Objects {
		if err := o.Verify(ctx); err != nil {
			return fmt.Errorf("archive damaged: %w", err)
		}
	}
	return nil
}
