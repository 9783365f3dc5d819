package server

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkActivityReport is the cost of one activity report in the
// handler chain (token check, routing, decoding, coalescing), without the
// network.
func BenchmarkActivityReport(b *testing.B) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(filepath.Join(runs, "r1"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[ledger]\npath = \""+filepath.Join(dir, "l.db")+"\"\n[[dirs]]\nroot = \""+runs+"\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	d, err := Open(context.Background(), Options{ConfigPath: cfg, Logs: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer d.closeAll()
	tok, _ := os.ReadFile(d.TokenFile())
	auth := "Bearer " + strings.TrimSpace(string(tok))
	h := d.Handler()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/v1/runtimes/r1/activity?backend=dir", strings.NewReader(`{"at":"2026-01-02T03:04:05Z"}`))
			req.Header.Set("Authorization", auth)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 204 {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	})
}
