package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build builds the command into a temporary folder with extra go build
// flags and returns what `reclaimer --version` prints.
func build(t *testing.T, env []string, flags ...string) string {
	t.Helper()
	_, out := buildBin(t, env, flags...)
	return out
}

func buildBin(t *testing.T, env []string, flags ...string) (string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reclaimer")
	args := append([]string{"build", "-o", bin}, flags...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", flags, err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	return bin, strings.TrimSpace(string(out))
}

// TestVersionInjected: -ldflags -X sets the version, commit and time, for
// builds without VCS stamping (this machine sets GOFLAGS=-buildvcs=false).
func TestVersionInjected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	got := build(t, []string{"GOFLAGS=-buildvcs=false"}, "-ldflags",
		"-X main.version=v9.8.7 -X main.commit=0123456789abcdef -X main.date=2026-12-01T12:00:00Z")
	if !strings.HasPrefix(got, "reclaimer v9.8.7 (commit 0123456789ab, 2026-12-01T12:00:00Z, go") {
		t.Fatalf("--version: %q", got)
	}
	if got := build(t, []string{"GOFLAGS=-buildvcs=false"}); !strings.HasPrefix(got, "reclaimer (devel) (go") {
		t.Fatalf("--version without VCS stamping or injection: %q", got)
	}
}

// TestVersionStampedFromGit: built with VCS stamping on, --version names
// the revision and time the toolchain recorded (go version -m shows
// them). Go does not stamp every checkout (a linked worktree, no git):
// then there is nothing to compare and the test says so.
func TestVersionStampedFromGit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, got := buildBin(t, []string{"GOFLAGS=-buildvcs=true"})
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var rev, when string
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "build" {
			if v, ok := strings.CutPrefix(f[1], "vcs.revision="); ok {
				rev = v
			}
			if v, ok := strings.CutPrefix(f[1], "vcs.time="); ok {
				when = v
			}
		}
	}
	if rev == "" {
		t.Skip("the toolchain recorded no VCS revision for this checkout")
	}
	if !strings.Contains(got, "commit "+rev[:12]) || !strings.Contains(got, when) {
		t.Fatalf("--version: %q, want commit %s and %s", got, rev[:12], when)
	}
}
