package beneath_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// TestReadFileRefusesWhatAnAgentCanPlant: a regular file is read; a link
// (to a file or through a folder), a FIFO (without blocking), a folder and
// a file over the limit are refused with their reason.
func TestReadFileRefusesWhatAnAgentCanPlant(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok", "gitdir: /x\n")
	write("big", strings.Repeat("x", 100))
	write("sub/inner", "inner")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := beneath.ReadFileAt(filepath.Join(dir, "ok"), 64); err != nil || string(got) != "gitdir: /x\n" {
		t.Fatalf("regular file: %q %v", got, err)
	}
	if got, err := beneath.ReadFileAt(filepath.Join(dir, "sub", "inner"), 64); err != nil || string(got) != "inner" {
		t.Fatalf("file in a folder: %q %v", got, err)
	}
	start := time.Now()
	for name, want := range map[string]error{
		"link":          beneath.ErrSymlink,
		"fifo":          beneath.ErrNotRegular,
		"sub":           beneath.ErrNotRegular,
		"big":           beneath.ErrTooLarge,
		"missing":       os.ErrNotExist,
		"linkdir/inner": nil, // refused, as a link on the way
	} {
		got, err := beneath.ReadFileAt(filepath.Join(dir, name), 64)
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %q, %v; want an error wrapping %v", name, got, err, want)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Error("reading a FIFO blocked")
	}
}
