package gitcmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGitNeverReadsNonRegularFilesWatch: the watch tells a process blocked
// opening a FIFO, or reading one a writer holds open, from one reading an
// anonymous pipe (git's own stdin), which it leaves alone.
func TestGitNeverReadsNonRegularFilesWatch(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	wait := func(cmd *exec.Cmd, want string) {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		deadline := time.Now().Add(2 * time.Second)
		for {
			got := blockedOnFIFO(cmd.Process.Pid)
			if want != "" && strings.Contains(got, want) {
				return
			}
			if want == "" && got != "" {
				t.Fatalf("%v: blocked on %q, want nothing", cmd.Args, got)
			}
			if time.Now().After(deadline) {
				if want == "" {
					return
				}
				t.Fatalf("%v: %q, want %q", cmd.Args, got, want)
			}
			time.Sleep(20 * time.Millisecond) // polling a real process: no clock to inject
		}
	}
	wait(exec.Command("cat", fifo), "opening a FIFO")
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wait(exec.Command("cat", fifo), "reading the FIFO "+fifo)
	pipe := exec.Command("cat")
	in, err := pipe.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	wait(pipe, "")
}
