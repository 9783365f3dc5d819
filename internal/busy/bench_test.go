package busy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkScan scans /proc for 20 folders. "host" is the machine as it
// is; "loaded" adds 250 sleeping processes (working in the folders) and
// three processes holding 15,000 descriptors each on files elsewhere, the
// size of a busy agent host. The scan is bound by system calls: about
// fifteen per process and one readlinkat per descriptor.
func BenchmarkScan(b *testing.B) {
	dir := b.TempDir()
	var roots []string
	for i := 0; i < 20; i++ {
		r := filepath.Join(dir, "run"+strconv.Itoa(i))
		if err := os.Mkdir(r, 0o755); err != nil {
			b.Fatal(err)
		}
		roots = append(roots, r)
	}
	run := func(b *testing.B) {
		ctx := context.Background()
		var s *Snapshot
		for b.Loop() {
			var err error
			if s, err = Scan(ctx, roots, Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Processes), "procs")
		b.ReportMetric(float64(countFDs()), "fds")
	}
	b.Run("host", run)
	b.Run("loaded", func(b *testing.B) {
		for i := 0; i < 250; i++ {
			cmd := exec.Command("sleep", "600")
			cmd.Dir = roots[i%len(roots)]
			start(b, cmd, false)
		}
		other := b.TempDir() // their files are in no folder asked about
		for i := 0; i < 3; i++ {
			helper(b, "fds", other, helperEnv+"_N=15000")
		}
		run(b)
	})
}

// countFDs counts the open descriptors of every process on the machine.
func countFDs() int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		n += len(fds)
	}
	return n
}
