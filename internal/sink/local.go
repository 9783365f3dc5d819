package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Local stores objects as files below a folder.
type Local struct {
	// Root is the folder, absolute. It is created on first use.
	Root string
}

// NewLocal returns a sink writing below root (absolute).
func NewLocal(root string) (*Local, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("local sink: %q is not an absolute path", root)
	}
	return &Local{Root: filepath.Clean(root)}, nil
}

func (l *Local) path(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	return filepath.Join(l.Root, filepath.FromSlash(name)), nil
}

// URL implements Sink: the object's path.
func (l *Local) URL(name string) string {
	return filepath.Join(l.Root, filepath.FromSlash(name))
}

// Check implements Sink: the folder exists or can be created.
func (l *Local) Check(ctx context.Context) error {
	if err := os.MkdirAll(l.Root, 0o700); err != nil {
		return fmt.Errorf("check archive folder %s: %w", l.Root, err)
	}
	return nil
}

// Put implements Sink: a temporary file beside the object, fsynced, renamed
// into place, and its folder fsynced. On error nothing is left behind.
func (l *Local) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	path, err := l.path(name)
	if err != nil {
		return 0, fmt.Errorf("put object: %w", err)
	}
	n, err := l.put(ctx, path, r)
	if err != nil {
		return n, fmt.Errorf("put object %s: %w", path, err)
	}
	return n, nil
}

func (l *Local) put(ctx context.Context, path string, r io.Reader) (int64, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := CopyContext(ctx, tmp, r, make([]byte, copyBuf))
	if err != nil {
		return n, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		return n, err
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, err
	}
	done = true
	return n, syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Open implements Sink.
func (l *Local) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	path, err := l.path(name)
	if err != nil {
		return nil, fmt.Errorf("open object: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open object %s: %w", path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open object %s: %w", path, err)
	}
	return f, nil
}

// Remove implements Sink, and removes the folders the object leaves empty
// (up to Root), so pruned runtimes leave no empty folders behind.
func (l *Local) Remove(ctx context.Context, name string) error {
	path, err := l.path(name)
	if err != nil {
		return fmt.Errorf("remove object: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove object %s: %w", path, err)
	}
	for dir := filepath.Dir(path); dir != l.Root && strings.HasPrefix(dir, l.Root+"/"); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or gone: either way done
		}
	}
	return nil
}

var _ Sink = (*Local)(nil)

// Sweeper is a sink that can remove the temporary objects a killed process
// left half written. Call it only while no other process writes to the
// sink (the engine does at start, holding the apply lock).
type Sweeper interface {
	SweepTemporary(ctx context.Context) ([]string, error)
}

// SweepTemporary implements Sweeper: it removes every temporary file Put
// writes beside an object (".<name>.tmp-<digits>") below Root, never
// following a link, and returns their paths. A missing Root holds none.
func (l *Local) SweepTemporary(ctx context.Context) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(l.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Type().IsRegular() && isTemporary(d.Name()) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed = append(removed, p)
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("sweep temporary objects in %s: %w", l.Root, err)
	}
	return removed, nil
}

// isTemporary tells a name os.CreateTemp made for Put: "." + object name +
// ".tmp-" + digits.
func isTemporary(name string) bool {
	i := strings.LastIndex(name, ".tmp-")
	if !strings.HasPrefix(name, ".") || i <= 1 || i+len(".tmp-") == len(name) {
		return false
	}
	for _, c := range name[i+len(".tmp-"):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var _ Sweeper = (*Local)(nil)
