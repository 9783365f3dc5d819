package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/sink"
)

func plainTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755})
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

func stream(data []byte) archive.Stream {
	return archive.Stream{Ext: "workspace.tar", Kind: archive.KindPlainTar, Folder: "workspace", Path: "/workspace",
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

func TestExportStreamsStoresVerifiesAndCounts(t *testing.T) {
	s, err := sink.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := plainTar(t, map[string]string{"src/a.go": "package a\n", "src/b.go": "package b\n"})
	req := archive.Request{Sink: s, Base: archive.ObjectBase("cloudflare", "sb", time.Unix(0, 0)), Runtime: "sb", Backend: "cloudflare"}
	m, err := archive.ExportStreams(ctx, req, []archive.Stream{stream(data)}, archive.Manifest{Survives: []string{"the workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Objects) != 1 || m.Objects[0].Bytes != int64(len(data)) || len(m.Folders) != 1 || m.Folders[0].Files != 2 || m.Folders[0].Dirs != 1 {
		t.Fatalf("manifest: %+v", m)
	}
	back, err := archive.ReadManifestFrom(ctx, s, archive.ManifestName(req.Base))
	if err != nil || back.Survives[0] != "the workspace" || back.Objects[0].SHA256 != m.Objects[0].SHA256 {
		t.Fatalf("stored manifest: %+v %v", back, err)
	}

	// A stream cut short is not a whole tar: nothing stays in the sink.
	req.Base = archive.ObjectBase("cloudflare", "cut", time.Unix(0, 0))
	_, err = archive.ExportStreams(ctx, req, []archive.Stream{stream(data[:len(data)-1500])}, archive.Manifest{})
	if !errors.Is(err, archive.ErrMismatch) {
		t.Fatalf("a cut stream: %v", err)
	}
	if _, err := s.Open(ctx, req.Base+".workspace.tar"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("a failed export left its object: %v", err)
	}

	// A stream that fails midway fails the export.
	req.Base = archive.ObjectBase("cloudflare", "broken", time.Unix(0, 0))
	bad := archive.Stream{Ext: "workspace.tar", Kind: archive.KindPlainTar,
		Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(io.MultiReader(bytes.NewReader(data[:600]), errReader{})), nil
		}}
	if _, err := archive.ExportStreams(ctx, req, []archive.Stream{bad}, archive.Manifest{}); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("a broken stream: %v", err)
	}

	// No streams: only the manifest (the provider keeps the content).
	req.Base = archive.ObjectBase("modal", "sb", time.Unix(0, 0))
	m, err = archive.ExportStreams(ctx, req, nil, archive.Manifest{Image: "im-123", Restore: "start it"})
	if err != nil || len(m.Objects) != 0 || m.Image != "im-123" {
		t.Fatalf("manifest only: %+v %v", m, err)
	}
	if back, err := archive.ReadManifestFrom(ctx, s, archive.ManifestName(req.Base)); err != nil || back.Image != "im-123" || back.Restore != "start it" {
		t.Fatalf("stored: %+v %v", back, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }
