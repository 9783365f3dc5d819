package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type explainJSON struct {
	Runtime struct {
		ID string `json:"id"`
	} `json:"runtime"`
	Observation struct {
		Listed           bool             `json:"listed"`
		State            string           `json:"state"`
		LastActivity     time.Time        `json:"last_activity"`
		LastActivityFrom string           `json:"last_activity_from"`
		SizeBytes        int64            `json:"size_bytes"`
		BytesByStep      map[string]int64 `json:"bytes_by_step"`
		Busy             string           `json:"busy"`
	} `json:"observation"`
	Protection *struct {
		Code string `json:"code"`
	} `json:"protection"`
	Policies []struct {
		Policy  string    `json:"policy"`
		Step    string    `json:"step"`
		Outcome string    `json:"outcome"`
		Code    string    `json:"code"`
		Reason  string    `json:"reason"`
		Due     time.Time `json:"due"`
	} `json:"policies"`
	PoliciesOff []string `json:"policies_off"`
	NextPass    struct {
		Summary   string `json:"summary"`
		Scheduled []struct {
			Step string `json:"step"`
		} `json:"scheduled"`
	} `json:"next_pass"`
	NextStep *struct {
		Step   string    `json:"step"`
		Policy string    `json:"policy"`
		Due    time.Time `json:"due"`
	} `json:"next_step"`
}

func (e explainJSON) verdict(t *testing.T, policy string) (outcome, code, reason string, due time.Time) {
	t.Helper()
	for _, v := range e.Policies {
		if v.Policy == policy {
			return v.Outcome, v.Code, v.Reason, v.Due
		}
	}
	t.Fatalf("%s: no verdict of %s in %+v", e.Runtime.ID, policy, e.Policies)
	return
}

// TestExplain explains real run folders, each kept or taken for another
// reason, through the local CLI, the CLI with --server and the API.
func TestExplain(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, r := range []string{"old", "fresh", "pinned", "leased", "busy", "doomed"} {
		write(t, filepath.Join(runs, r, "home", ".cache", "blob"), strings.Repeat("c", 16<<10))
		write(t, filepath.Join(runs, r, "work", "notes.md"), "keep")
		when := old
		if r == "fresh" {
			when = time.Now().Add(-2 * 24 * time.Hour)
		}
		age(t, when, filepath.Join(runs, r))
	}
	cfg := config(t, dir, "[server]\nlisten = \"127.0.0.1:0\"\ninterval = \"1h\"\n[[dirs]]\nroot = \""+runs+
		"\"\nhome = \"home\"\nworkspaces = [\"work\"]\nretention = \"7d\"\ngrace = \"1d\"\n")
	sleep := exec.Command("sleep", "300")
	sleep.Dir = filepath.Join(runs, "busy")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	runOK(t, "--config", cfg, "pin", "pinned", "--reason", "demo tomorrow")
	runOK(t, "--config", cfg, "lease", "leased", "--for", "2h")

	explain := func(id string, args ...string) explainJSON {
		var ex explainJSON
		runJSON(t, &ex, append(args, "explain", id)...)
		if ex.Runtime.ID != id || !ex.Observation.Listed {
			t.Fatalf("explain %s: %+v", id, ex)
		}
		return ex
	}
	local := []string{"--config", cfg}

	// Inactive past its retention: the next pass announces the archive.
	ex := explain("old", local...)
	if o, code, _, due := ex.verdict(t, "retention"); o != "announces" || code != "retention" || due.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("old: retention %s %s due %s", o, code, due)
	}
	if o, code, _, _ := ex.verdict(t, "caches"); o != "acts" || code != "caches" {
		t.Errorf("old: caches %s %s", o, code)
	}
	if ex.Observation.SizeBytes < 16<<10 || ex.Observation.BytesByStep["caches"] < 16<<10 || ex.Observation.BytesByStep["archive"] < 16<<10 || ex.Observation.LastActivityFrom != "observed" {
		t.Errorf("old: observation %+v", ex.Observation)
	}
	if len(ex.NextPass.Scheduled) != 1 || !strings.Contains(ex.NextPass.Summary, "announce archive") {
		t.Errorf("old: next pass %+v", ex.NextPass)
	}

	// Too recent (by 4d and some hours): not, and when the archive would
	// come if nothing changed.
	ex = explain("fresh", local...)
	o, code, reason, due := ex.verdict(t, "retention")
	wantDue := ex.Observation.LastActivity.Add(8 * 24 * time.Hour)
	if o != "not" || code != "too_recent" || !strings.Contains(reason, "too recent by 4d") || !due.Equal(wantDue) {
		t.Errorf("fresh: retention %s %s %q due %s, want due %s", o, code, reason, due, wantDue)
	}
	for _, off := range []string{"idle_suspend", "lifetime_cap", "orphan", "disk_budget"} {
		if !strings.Contains(strings.Join(ex.PoliciesOff, ","), off) {
			t.Errorf("fresh: %s not among the policies off: %v", off, ex.PoliciesOff)
		}
	}

	// Protected: pinned, leased until T, busy with its process.
	for id, want := range map[string]string{"pinned": "pinned", "leased": "leased", "busy": "busy"} {
		ex := explain(id, local...)
		if ex.Protection == nil || ex.Protection.Code != want {
			t.Errorf("%s: protection %+v", id, ex.Protection)
		}
		for _, p := range []string{"retention", "caches"} {
			if o, code, _, _ := ex.verdict(t, p); o != "not" || code != want {
				t.Errorf("%s: %s %s %s", id, p, o, code)
			}
		}
	}
	if ex := explain("busy", local...); !strings.Contains(ex.Observation.Busy, "sleep") {
		t.Errorf("busy: observation says busy %q", ex.Observation.Busy)
	}

	text := runOK(t, "--config", cfg, "explain", "fresh")
	for _, want := range []string{"runtime dir/fresh", "POLICY", "retention", "too_recent: too recent by 4d", "next step if nothing changes: caches", "not in force:"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain text lacks %q:\n%s", want, text)
		}
	}
	if _, errOut, code := run(t, "--config", cfg, "explain", "nope"); code != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("explain nope: exit %d %s", code, errOut)
	}
	// Deleted (archived first): no policy looks at it any more.
	runOK(t, "--config", cfg, "delete", "doomed")
	var gone explainJSON
	runJSON(t, &gone, "--config", cfg, "explain", "doomed")
	if gone.Observation.Listed || len(gone.Policies) != 0 || !strings.HasPrefix(gone.NextPass.Summary, "nothing: already ") || gone.NextStep != nil {
		t.Errorf("explain of a deleted runtime: %+v", gone)
	}
	if _, _, code := run(t, "--config", cfg, "explain"); code != 2 {
		t.Errorf("explain without an ID: exit %d", code)
	}

	// Through a daemon (whose start pass announced old's archive and took
	// the caches): --server and the API give the same verdicts.
	e := newEdges(t, cfg)
	viaServer := explain("old", e.remoteArgs...)
	var api explainJSON
	if status := e.api("GET", "/v1/runtimes/old/explain", "", &api); status != 200 {
		t.Fatalf("GET /v1/runtimes/old/explain: %d", status)
	}
	if o, code, _, _ := viaServer.verdict(t, "retention"); o != "due" || code != "retention" {
		t.Errorf("old through --server after the start pass: retention %s %s", o, code)
	}
	if o, code, _, _ := viaServer.verdict(t, "caches"); o != "not" || code != "nothing_to_reclaim" {
		t.Errorf("old through --server after the start pass: caches %s %s", o, code)
	}
	if !jsonEqual(viaServer.Policies, api.Policies) || !jsonEqual(viaServer.NextStep, api.NextStep) {
		t.Errorf("--server %+v\nAPI %+v", viaServer, api)
	}
	// A hold taken over the API: held by its holder.
	if status := e.api("POST", "/v1/runtimes/pinned/holds", `{"holder":"agent-7","ttl":"10m"}`, nil); status != 201 {
		t.Fatalf("take a hold: %d", status)
	}
	runOK(t, append(e.remoteArgs, "unpin", "pinned")...)
	var held explainJSON
	e.api("GET", "/v1/runtimes/pinned/explain", "", &held)
	if o, code, reason, _ := held.verdict(t, "retention"); held.Protection == nil || held.Protection.Code != "held" || o != "not" ||
		code != "held" || reason != "held by agent-7" {
		t.Errorf("held: protection %+v, retention %s %s %q", held.Protection, o, code, reason)
	}
	if status := e.api("GET", "/v1/runtimes/nope/explain", "", nil); status != 404 {
		t.Errorf("GET /v1/runtimes/nope/explain: %d", status)
	}
	{
		viaLocal := explain("fresh", local...)
		viaServer := explain("fresh", e.remoteArgs...)
		_, _, _, dl := viaLocal.verdict(t, "retention")
		_, _, _, ds := viaServer.verdict(t, "retention")
		if !dl.Equal(ds) {
			t.Errorf("fresh: the archive due at %s locally, %s through the daemon", dl, ds)
		}
	}
}
