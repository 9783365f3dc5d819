package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestListSortsSearchesAndReclaimsAnnounced: ls sorts by size, searches,
// keeps the announced only; apply --announced carries out the archive
// announced for a runtime now, locally and through a daemon alike.
func TestListSortsSearchesAndReclaimsAnnounced(t *testing.T) {
	for _, through := range []string{"local", "server"} {
		t.Run(through, func(t *testing.T) {
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			old := time.Now().Add(-30 * 24 * time.Hour)
			for name, size := range map[string]int{"small": 1, "big": 64, "middle": 16} {
				p := filepath.Join(runs, name)
				write(t, filepath.Join(p, "out.bin"), strings.Repeat("x", size<<10))
				for _, q := range []string{filepath.Join(p, "out.bin"), p} {
					if err := os.Chtimes(q, old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
			cfg := config(t, dir, "[[dirs]]\nroot = \""+runs+"\"\nretention = \"7d\"\ngrace = \"24h\"\n")
			args := []string{"--config", cfg}
			if through == "server" {
				url, token := serve(t, cfg)
				args = append(args, "--server", url, "--token-file", token)
			} else {
				runOK(t, append(args, "apply")...) // announces the archives, due in a day
			}
			cmd := func(more ...string) []string { return append(slices.Clone(args), more...) }
			var rows []struct {
				ID            string `json:"id"`
				SizeBytes     int64  `json:"size_bytes"`
				ScheduledStep string `json:"scheduled_step"`
				State         string `json:"state"`
			}
			ids := func() []string {
				var out []string
				for _, r := range rows {
					out = append(out, r.ID)
				}
				return out
			}
			runJSON(t, &rows, cmd("ls", "--sort", "size")...)
			if got := ids(); !slices.Equal(got, []string{"big", "middle", "small"}) {
				t.Fatalf("ls --sort size: %v", got)
			}
			runJSON(t, &rows, cmd("ls", "--sort", "size", "--desc")...)
			if got := ids(); !slices.Equal(got, []string{"small", "middle", "big"}) {
				t.Fatalf("ls --sort size --desc: %v", got)
			}
			runJSON(t, &rows, cmd("ls", "--scheduled", "--search", "MID")...)
			if got := ids(); !slices.Equal(got, []string{"middle"}) || rows[0].ScheduledStep != "archive" {
				t.Fatalf("ls --scheduled --search MID: %+v", rows)
			}
			if _, stderr, code := run(t, cmd("ls", "--sort", "name")...); code != 2 || !strings.Contains(stderr, "size, activity, due") {
				t.Fatalf("ls --sort name: exit %d: %s", code, stderr)
			}
			runOK(t, cmd("apply", "--announced", "--runtime", "middle")...)
			if exists(filepath.Join(runs, "middle")) {
				t.Fatal("apply --announced left the run folder")
			}
			runJSON(t, &rows, cmd("ls", "--scheduled")...)
			if got := ids(); !slices.Equal(got, []string{"big", "small"}) {
				t.Fatalf("announced after apply --announced: %v", got)
			}
			if _, stderr, code := run(t, cmd("apply", "--announced")...); code != 2 || !strings.Contains(stderr, "--runtime") {
				t.Fatalf("apply --announced without --runtime: exit %d: %s", code, stderr)
			}
		})
	}
}
