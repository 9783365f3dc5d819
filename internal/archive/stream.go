package archive

import (
	"archive/tar"
	"context"
	"fmt"
	"io"

	"github.com/reclaimer/reclaimer/internal/sink"
)

// KindPlainTar is an uncompressed tar as a provider wrote it (a Cloudflare
// sandbox's persisted workspace): stored byte for byte, restored by
// handing it back to the provider.
const KindPlainTar = "tar"

// Stream is one object a provider hands over as a byte stream (a tar of a
// sandbox's workspace that the sandbox itself writes), stored as it comes.
type Stream struct {
	// Ext names the object: Request.Base + "." + Ext.
	Ext string
	// Kind is the object's kind (KindPlainTar for a plain tar).
	Kind string
	// Open starts the stream; the export closes it.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// Folder, for a tar, names what it holds in the manifest
	// (FolderInfo.Name) and Path where it came from.
	Folder, Path string
}

// ExportStreams stores each stream in the sink as it arrives (nothing is
// staged locally), reads every object back (size and SHA-256; a plain tar
// is also read entry by entry to its end, so a cut or garbled stream
// fails), then stores the manifest and reads it back. m carries what the
// caller knows beyond the objects (Survives, Excluded, Image, Restore). On
// error whatever was stored is removed again. With no streams only the
// manifest is written: an archive whose content the provider keeps (Image).
func ExportStreams(ctx context.Context, req Request, streams []Stream, m Manifest) (Manifest, error) {
	x, err := newExporter(req)
	if err != nil {
		return Manifest{}, fmt.Errorf("export %s/%s: %w", req.Backend, req.Runtime, err)
	}
	defer x.close()
	if err := x.addStreams(ctx, &m, streams); err != nil {
		x.abandon()
		return Manifest{}, fmt.Errorf("export %s/%s: %w", req.Backend, req.Runtime, err)
	}
	if err := x.finish(ctx, &m); err != nil {
		x.abandon()
		return Manifest{}, fmt.Errorf("export %s/%s: %w", req.Backend, req.Runtime, err)
	}
	return m, nil
}

func (x *exporter) addStreams(ctx context.Context, m *Manifest, streams []Stream) error {
	for _, s := range streams {
		r, err := s.Open(ctx)
		if err != nil {
			return err
		}
		obj, err := x.put(ctx, s.Kind, x.name(s.Ext), r)
		r.Close()
		if err != nil {
			return err
		}
		obj.Root = s.Path
		x.objects[len(x.objects)-1] = obj
		if s.Kind != KindPlainTar {
			continue
		}
		info, err := readBackTar(ctx, x.req.Sink, obj)
		if err != nil {
			return err
		}
		info.Name, info.Path = s.Folder, s.Path
		m.Folders = append(m.Folders, info)
	}
	return nil
}

// readBackTar reads a plain tar object back from the sink: every header
// and every byte, checking the size and SHA-256 of the whole, and counts
// what it holds.
func readBackTar(ctx context.Context, s sink.Sink, o Object) (FolderInfo, error) {
	info := FolderInfo{Object: o.Name}
	r, err := s.Open(ctx, o.Name)
	if err != nil {
		return info, fmt.Errorf("verify %s: %w", o.Name, err)
	}
	defer r.Close()
	hc := newHashCounter()
	tail := &tailWriter{}
	tr := tar.NewReader(io.TeeReader(r, io.MultiWriter(hc, tail)))
	buf := make([]byte, copyBuf)
	var end int64 // where the last entry ended, block-aligned
	for {
		if err := ctx.Err(); err != nil {
			return info, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			// Go's reader also ends cleanly at a stream cut between
			// entries: require the two zero blocks that end a tar.
			if hc.n-end < 2*blockSize || !tail.zero() {
				return info, fmt.Errorf("verify %s: the tar has no end-of-archive blocks (cut short?): %w", s.URL(o.Name), ErrMismatch)
			}
			break
		}
		if err != nil {
			return info, fmt.Errorf("verify %s: not a whole tar: %v: %w", s.URL(o.Name), err, ErrMismatch)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			info.Dirs++
		case tar.TypeSymlink:
			info.Symlinks++
		case tar.TypeReg:
			info.Files++
			info.Bytes += h.Size
		}
		if _, err := sink.CopyContext(ctx, io.Discard, tr, buf); err != nil {
			return info, fmt.Errorf("verify %s: %v: %w", s.URL(o.Name), err, ErrMismatch)
		}
		end = (hc.n + blockSize - 1) / blockSize * blockSize
	}
	// The tar's end-of-archive blocks may be followed by padding.
	if _, err := sink.CopyContext(ctx, io.Discard, io.TeeReader(r, hc), buf); err != nil {
		return info, fmt.Errorf("verify %s: %w", s.URL(o.Name), err)
	}
	if hc.n != o.Bytes || hc.sum() != o.SHA256 {
		return info, fmt.Errorf("verify %s: read back %d bytes with sha256 %s, stored %d bytes with sha256 %s: %w",
			s.URL(o.Name), hc.n, hc.sum(), o.Bytes, o.SHA256, ErrMismatch)
	}
	return info, nil
}

const blockSize = 512

// tailWriter keeps the last two tar blocks that passed through it.
type tailWriter struct {
	buf [2 * blockSize]byte
	n   int64
}

func (t *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > len(t.buf) {
		t.n += int64(len(p) - len(t.buf))
		p = p[len(p)-len(t.buf):]
	}
	for _, b := range p {
		t.buf[t.n%int64(len(t.buf))] = b
		t.n++
	}
	return n, nil
}

func (t *tailWriter) zero() bool {
	if t.n < int64(len(t.buf)) {
		return false
	}
	for _, b := range t.buf {
		if b != 0 {
			return false
		}
	}
	return true
}
