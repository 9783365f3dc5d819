package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotFound reports an object, folder or bucket that does not exist.
var ErrNotFound = errors.New("not found")

// Sink stores archive objects by name. See the package documentation for
// the contract.
type Sink interface {
	// Put stores what r yields as name and returns the number of bytes
	// stored.
	Put(ctx context.Context, name string, r io.Reader) (int64, error)
	// Open reads the object name back.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// Remove deletes the object name; a missing object is not an error.
	Remove(ctx context.Context, name string) error
	// Check tells whether the sink can be written to.
	Check(ctx context.Context) error
	// URL says where name is stored, for people and the ledger: a path
	// for Local, s3://bucket/key for S3.
	URL(name string) string
}

// CheckName refuses a name that could leave the sink's folder or prefix.
func CheckName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\\\x00") {
		return fmt.Errorf("object name %q: must be a relative slash-separated path", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("object name %q: empty, \".\" or \"..\" segment", name)
		}
	}
	return nil
}

// copyBuf is the one buffer a local copy uses.
const copyBuf = 256 << 10

// CopyContext copies src to dst through buf, checking ctx between chunks,
// so a canceled pass stops a long upload or read-back promptly.
func CopyContext(ctx context.Context, dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
			if w != k {
				return n, io.ErrShortWrite
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// Unavailable is a sink that could not be set up (no credentials, say):
// every call fails with Err. Commands that never archive still work, and
// an archive step fails with the reason and removes nothing.
type Unavailable struct{ Err error }

func (u Unavailable) err() error { return fmt.Errorf("archive storage unavailable: %w", u.Err) }

// Put implements Sink.
func (u Unavailable) Put(context.Context, string, io.Reader) (int64, error) { return 0, u.err() }

// Open implements Sink.
func (u Unavailable) Open(context.Context, string) (io.ReadCloser, error) { return nil, u.err() }

// Remove implements Sink.
func (u Unavailable) Remove(context.Context, string) error { return u.err() }

// Check implements Sink.
func (u Unavailable) Check(context.Context) error { return u.err() }

// URL implements Sink.
func (u Unavailable) URL(name string) string { return name }

var _ Sink = Unavailable{}
