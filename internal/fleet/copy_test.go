package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/cli"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/views"
)

func runCLI(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Version: "test"})
	return out.String(), errb.String(), code
}

// TestLedgerCopy moves a host's SQLite ledger into PostgreSQL: every
// record, its local source renamed for the replica, checked by reading
// back; a second copy into the now non-empty database is refused.
func TestLedgerCopy(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "state", "ledger.db")
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "reclaimer.toml")
	if err := os.WriteFile(cfgPath, []byte("[ledger]\npath = \""+dbPath+"\"\n\n[[dirs]]\nroot = \""+runs+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.UTC)
	local := ledger.Key{Source: "dirs:" + runs, Backend: "dir", ID: "run-1"}
	remote := ledger.Key{Source: "sandboxes", Backend: "e2b", ID: "sb-1"}
	if err := src.Observe(ctx, []ledger.Observation{
		{Key: local, State: "stopped", Path: filepath.Join(runs, "run-1"), Labels: map[string]string{"owner": "a"}, SizeBytes: 42, At: t0},
		{Key: remote, State: "running", At: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Update(ctx, local, func(r *ledger.RuntimeRecord) error {
		r.Pinned, r.PinReason, r.LeaseUntil = true, "keep", t0.Add(time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := src.RecordActivity(ctx, []ledger.Activity{{Key: local, At: t0.Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	hold, err := src.TakeHold(ctx, ledger.HoldRequest{Key: remote, Holder: "agent", TTL: time.Hour, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	id, err := src.AppendIntent(ctx, ledger.Intent{Key: local, Step: "caches", Paths: []string{"/x"}, Reason: "stopped", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.RecordOutcome(ctx, id, ledger.Outcome{Result: ledger.ResultDone, FreedBytes: 7, At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.AppendIntent(ctx, ledger.Intent{Key: remote, Step: "suspend", At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.RecordNotice(ctx, ledger.Notice{Key: local, Kind: "scheduled", Step: "archive", Due: t0.Add(24 * time.Hour), At: t0, Message: "idle"}); err != nil {
		t.Fatal(err)
	}
	if err := src.RecordArchive(ctx, ledger.Archive{ID: "ar-1", Key: local, CreatedAt: t0, Location: "/a", Formats: []string{"tar.zst"}, Bytes: 9,
		Objects: []ledger.ArchiveObject{{Name: "w.tar.zst", Bytes: 9, SHA256: "ab"}}, Manifest: json.RawMessage(`{"b": 1, "a": [2]}`)}); err != nil {
		t.Fatal(err)
	}
	want, err := ledger.ReadSnapshot(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()

	out, errOut, code := runCLI("--config", cfgPath, "ledger", "copy", "--to", dbURL, "--replica", "host-a", "--json")
	if code != 0 {
		t.Fatalf("ledger copy: exit %d\n%s%s", code, out, errOut)
	}
	var res views.LedgerCopy
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	newLocal := ledger.Key{Source: "host-a/dirs:" + runs, Backend: "dir", ID: "run-1"}
	if res.Renamed["dirs:"+runs] != newLocal.Source || res.Counts["runtimes"] != 2 || res.Counts["journal"] != 2 ||
		res.Counts["holds"] != 1 || res.Counts["archives"] != 1 || res.Counts["notices"] != 1 || res.Counts["activity"] != 1 {
		t.Errorf("copy: %+v", res)
	}
	if len(res.Foreign) != 1 || res.Foreign[0] != "sandboxes" {
		t.Errorf("foreign sources %v, want [sandboxes] (not in this configuration)", res.Foreign)
	}

	dst, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := ledger.ReadSnapshot(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	want.Rekey(func(k ledger.Key) ledger.Key {
		if k == local {
			return newLocal
		}
		return k
	})
	if got.Digest() != want.Digest() || res.Digest != want.Digest() {
		t.Errorf("digest of the copy %s, of the source %s, reported %s", got.Digest(), want.Digest(), res.Digest)
	}
	rec, err := dst.Runtime(ctx, newLocal)
	if err != nil || !rec.Pinned || !rec.LeaseUntil.Equal(t0.Add(time.Hour)) || rec.FirstSeen != t0 {
		t.Errorf("copied record %+v, %v", rec, err)
	}
	// The hold keeps its id: the agent renews it as before.
	if _, err := dst.RenewHold(ctx, ledger.HoldRenewal{Key: remote, ID: hold.ID, TTL: time.Hour, Now: t0.Add(time.Minute)}); err != nil {
		t.Errorf("renew the copied hold: %v", err)
	}
	// New journal entries number on from the copied ones.
	if n, err := dst.AppendIntent(ctx, ledger.Intent{Key: remote, Step: "suspend", At: t0}); err != nil || n <= id+1 {
		t.Errorf("next journal id %d, %v; want above %d", n, err, id+1)
	}

	// Again: the target holds records now, and is left alone.
	out, errOut, code = runCLI("--config", cfgPath, "ledger", "copy", "--to", dbURL, "--replica", "host-a")
	if code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("a second copy: exit %d\n%s%s", code, out, errOut)
	}
	// A password in the URL is never printed.
	_, errOut, code = runCLI("--config", cfgPath, "ledger", "copy", "--to", "postgres://u:s3cret@127.0.0.1:1/x?connect_timeout=1", "--replica", "host-a")
	if code == 0 || strings.Contains(errOut, "s3cret") {
		t.Errorf("unreachable target: exit %d, %s", code, errOut)
	}
}
