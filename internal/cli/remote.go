package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// remoteCommands work against a running daemon with --server.
var remoteCommands = map[string]bool{"plan": true, "apply": true, "ls": true, "status": true, "touch": true,
	"pin": true, "unpin": true, "lease": true, "retention": true, "delete": true, "log": true}

// remoteClient talks to the daemon through the generated client.
type remoteClient struct {
	api *openapi.ClientWithResponses
}

func (c *command) dial() (*remoteClient, error) {
	tok, err := c.readToken()
	if err != nil {
		return nil, err
	}
	base, hc := c.server, &http.Client{Timeout: 10 * time.Minute}
	if p, ok := strings.CutPrefix(c.server, "unix:"); ok {
		base = "http://reclaimer"
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", p)
		}}
	}
	api, err := openapi.NewClientWithResponses(strings.TrimRight(base, "/"), openapi.WithHTTPClient(hc),
		openapi.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}))
	if err != nil {
		return nil, usagef("--server %q: %v", c.server, err)
	}
	return &remoteClient{api: api}, nil
}

// readToken finds the token: --token-file, then [server] token_file of
// --config, then api.token next to the ledger (the daemon's default).
func (c *command) readToken() (string, error) {
	path := c.tokenFile
	if path == "" {
		cfg := config.Default()
		if c.configPath != "" {
			var err error
			if cfg, err = config.Load(c.configPath); err != nil {
				return "", usageError{err}
			}
		}
		path = cfg.Server.TokenFile
		if path == "" && cfg.Ledger.Path != "" {
			path = filepath.Join(filepath.Dir(cfg.Ledger.Path), "api.token")
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", usagef("read the API token: %v (give --token-file)", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// check turns a failed request, or an error answer, into an error naming
// its status and the daemon's message.
func check(err error, resp *http.Response, body []byte) error {
	if err != nil {
		return fmt.Errorf("ask the daemon: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var e openapi.Error
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg := e.Error.Message
		if e.Error.Field != "" {
			msg = e.Error.Field + ": " + msg
		}
		err := fmt.Errorf("the daemon answered %d: %s", resp.StatusCode, msg)
		if resp.StatusCode == 400 || resp.StatusCode == 404 {
			return usageError{err}
		}
		return err
	}
	return fmt.Errorf("the daemon answered %s", resp.Status)
}

// splitKey reads "ID" or "backend/ID".
func splitKey(name string) (backendName, id string, err error) {
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, ".") {
		return "", "", usagef("runtime %q: with --server give its ID (or backend/ID), not a path", name)
	}
	if b, i, ok := strings.Cut(name, "/"); ok {
		return b, i, nil
	}
	return "", name, nil
}

func (c *command) remote(ctx context.Context, name string, args []string) error {
	rc, err := c.dial()
	if err != nil {
		return err
	}
	switch name {
	case "plan", "apply":
		return c.remotePass(ctx, rc, name, args)
	case "ls":
		return c.remoteLs(ctx, rc, args)
	case "status":
		return c.remoteStatus(ctx, rc, args)
	case "log":
		return c.remoteLog(ctx, rc, args)
	case "delete":
		return c.remoteDelete(ctx, rc, args)
	}
	return c.remoteMark(ctx, rc, name, args)
}

func (c *command) remotePass(ctx context.Context, rc *remoteClient, name string, args []string) error {
	fs := newFlags(name, c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	var only multi
	var steps stepsFlag
	fs.Var(&only, "runtime", "only this runtime (repeatable)")
	fs.Var(&steps, "step", "only this step (repeatable)")
	out := fs.String("out", "", "also save the plan to FILE (plan)")
	planFile := fs.String("plan", "", "apply exactly this plan, made by the same daemon (apply)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var apiSteps []openapi.Step
	for _, s := range steps {
		apiSteps = append(apiSteps, openapi.Step(s))
	}
	if name == "plan" {
		resp, err := rc.api.GetPlanWithResponse(ctx, &openapi.GetPlanParams{Step: apiSteps, Runtime: only})
		if err != nil {
			return check(err, nil, nil)
		}
		if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
			return err
		}
		var p plan.Plan
		if err := json.Unmarshal(resp.Body, &p); err != nil {
			return fmt.Errorf("read the plan: %w", err)
		}
		if *out != "" {
			if err := plan.Write(*out, &p); err != nil {
				return err
			}
		}
		if *asJSON {
			return printJSON(c.env.Stdout, &p)
		}
		printPlan(c.env.Stdout, &p)
		return nil
	}
	req := openapi.PassRequest{Steps: apiSteps, Runtimes: only}
	if *planFile != "" {
		if len(only) > 0 || len(steps) > 0 {
			return usagef("--plan cannot be combined with --runtime or --step: a saved plan is applied as it is")
		}
		p, err := plan.Read(*planFile)
		if err != nil {
			return usageError{err}
		}
		req = openapi.PassRequest{PlanId: p.ID}
	}
	resp, err := rc.api.RunPassWithResponse(ctx, req)
	if err != nil {
		return check(err, nil, nil)
	}
	if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
		return err
	}
	var body struct {
		Applied *plan.Applied `json:"applied"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil || body.Applied == nil {
		return fmt.Errorf("read the pass: %v", err)
	}
	c.failed = body.Applied.Failed()
	if *asJSON {
		return printJSON(c.env.Stdout, body.Applied)
	}
	printApplied(c.env.Stdout, body.Applied)
	return nil
}

// runtimeRow is the ls row of a runtime the daemon described.
func runtimeRow(r openapi.Runtime) RuntimeRow {
	return RuntimeRow{ID: r.Id, Backend: r.Backend, State: backend.State(r.State), Path: r.Path, LastActive: r.LastActive,
		SizeBytes: r.SizeBytes, Pinned: r.Pinned, LeaseUntil: r.LeaseUntil, Retention: r.Retention,
		ScheduledStep: backend.Step(r.ScheduledStep), ScheduledDue: r.ScheduledDue, Busy: r.Busy, Unsaved: r.Unsaved,
		ArchiveID: r.ArchiveId}
}

func (c *command) remoteLs(ctx context.Context, rc *remoteClient, args []string) error {
	fs := newFlags("ls", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	rows := []RuntimeRow{}
	cursor := ""
	for {
		resp, err := rc.api.ListRuntimesWithResponse(ctx, &openapi.ListRuntimesParams{Limit: 1000, Cursor: cursor})
		if err != nil {
			return check(err, nil, nil)
		}
		if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
			return err
		}
		for _, r := range resp.JSON200.Runtimes {
			rows = append(rows, runtimeRow(r))
		}
		if cursor = resp.JSON200.NextCursor; cursor == "" {
			break
		}
	}
	if *asJSON {
		return printJSON(c.env.Stdout, rows)
	}
	return printRuntimeRows(c.env.Stdout, rows)
}

func (c *command) remoteStatus(ctx context.Context, rc *remoteClient, args []string) error {
	fs := newFlags("status", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	resp, err := rc.api.GetStatusWithResponse(ctx)
	if err != nil {
		return check(err, nil, nil)
	}
	if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
		return err
	}
	s := resp.JSON200
	st := Status{ByState: map[backend.State]int{}, ByBackend: s.RuntimesByBackend, Reclaimable: map[backend.Step]int64{}}
	for _, f := range s.Filesystems {
		st.Filesystems = append(st.Filesystems, policy.Filesystem{Path: f.Path, UsedBytes: uint64(f.UsedBytes),
			AvailBytes: uint64(f.AvailBytes), Fraction: f.Fraction, High: f.High, Low: f.Low})
	}
	for k, v := range s.RuntimesByState {
		st.ByState[backend.State(k)] = v
	}
	for k, v := range s.ReclaimableBytesByStep {
		st.Reclaimable[backend.Step(k)] = v
	}
	for _, n := range s.Scheduled {
		st.Scheduled = append(st.Scheduled, plan.Notice{Runtime: n.Runtime, Backend: n.Backend, Step: backend.Step(n.Step), Due: n.Due})
	}
	for _, pr := range s.Problems {
		st.Problems = append(st.Problems, plan.Skipped{Runtime: pr.Runtime, Backend: pr.Backend, Reason: pr.Reason})
	}
	if j, err := rc.api.GetJournalWithResponse(ctx, &openapi.GetJournalParams{Limit: 1}); err == nil && j.JSON200 != nil && len(j.JSON200.Entries) > 0 {
		e := journalEntry(j.JSON200.Entries[0])
		st.LastPass = &e
	}
	if *asJSON {
		return printJSON(c.env.Stdout, st)
	}
	out := c.env.Stdout
	printStatusHead(out, &st)
	if lp := s.LastPass; !lp.StartedAt.IsZero() {
		fmt.Fprintf(out, "last pass: %s (%s), %d actions, freed %s, %d failed\n", lp.FinishedAt.Local().Format(time.RFC3339),
			lp.Trigger, lp.Actions, sizeText(lp.FreedBytes), lp.Failed)
	}
	if !s.NextPassAt.IsZero() {
		fmt.Fprintf(out, "next pass: %s\n", s.NextPassAt.Local().Format(time.RFC3339))
	}
	printProblems(out, st.Problems)
	return nil
}

// journalEntry is the ledger's form of an API journal entry, so that log
// --json prints the same shape with or without --server.
func journalEntry(e openapi.JournalEntry) ledger.JournalEntry {
	je := ledger.JournalEntry{ID: e.Id, Intent: ledger.Intent{PlanID: e.PlanId, Key: ledger.Key{Backend: e.Backend, ID: e.Runtime},
		Step: e.Step, Paths: e.Paths, Reason: e.Reason, At: e.At}}
	if o := e.Outcome; o.Result != "" {
		je.Outcome = &ledger.Outcome{Result: o.Result, Reason: o.Reason, FreedBytes: o.FreedBytes, At: o.At}
	}
	return je
}

func (c *command) remoteLog(ctx context.Context, rc *remoteClient, args []string) error {
	fs := newFlags("log", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "how many entries, newest first")
	runtime := fs.String("runtime", "", "only this runtime")
	planID := fs.String("plan", "", "only this plan")
	if err := parse(fs, args); err != nil {
		return err
	}
	params := &openapi.GetJournalParams{Limit: min(max(*limit, 1), 1000), PlanId: *planID}
	if *runtime != "" {
		b, id, err := splitKey(*runtime)
		if err != nil {
			return err
		}
		params.Runtime, params.Backend = id, b
	}
	resp, err := rc.api.GetJournalWithResponse(ctx, params)
	if err != nil {
		return check(err, nil, nil)
	}
	if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
		return err
	}
	entries := []ledger.JournalEntry{}
	for _, e := range resp.JSON200.Entries {
		entries = append(entries, journalEntry(e))
	}
	if *asJSON {
		return printJSON(c.env.Stdout, entries)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUNTIME\tSTEP\tOUTCOME\tFREED\tREASON")
	for _, e := range entries {
		outcome, freed, reason := "unfinished", "-", e.Intent.Reason
		if e.Outcome != nil {
			outcome, freed = e.Outcome.Result, sizeText(e.Outcome.FreedBytes)
			if e.Outcome.Reason != "" {
				reason = e.Outcome.Reason
			}
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.Intent.At.Local().Format("2006-01-02 15:04:05"),
			e.Intent.Key.Backend, e.Intent.Key.ID, e.Intent.Step, outcome, freed, reason)
	}
	return tw.Flush()
}

// remoteID parses "ID [flags]" like openRuntime.
func remoteID(name string, fs *flag.FlagSet, args []string) (backendName, id string, err error) {
	first, rest := splitID(args)
	if err := parse(fs, rest); err != nil {
		return "", "", err
	}
	if first == "" && fs.NArg() == 1 {
		first = fs.Arg(0)
	}
	if first == "" {
		return "", "", usagef("%s: which runtime? (its ID)", name)
	}
	return splitKey(first)
}

func (c *command) remoteDelete(ctx context.Context, rc *remoteClient, args []string) error {
	fs := newFlags("delete", c.env)
	asJSON := fs.Bool("json", false, "print JSON")
	b, id, err := remoteID("delete", fs, args)
	if err != nil {
		return err
	}
	resp, err := rc.api.ReleaseRuntimeWithResponse(ctx, id, &openapi.ReleaseRuntimeParams{Backend: b, Force: true})
	if err != nil {
		return check(err, nil, nil)
	}
	if resp.StatusCode() == http.StatusLocked {
		c.failed = true
		var e openapi.Error
		_ = json.Unmarshal(resp.Body, &e)
		fmt.Fprintf(c.env.Stderr, "reclaimer: not deleting %s: %s\n", id, e.Error.Message)
		return nil
	}
	if err := check(nil, resp.HTTPResponse, resp.Body); err != nil {
		return err
	}
	r := resp.JSON200.Result
	res := &plan.Applied{Results: []plan.Result{{Runtime: r.Runtime, Backend: r.Backend, Step: backend.Step(r.Step),
		Outcome: plan.Outcome(r.Outcome), Reason: r.Reason, FreedBytes: r.FreedBytes, ArchiveID: r.ArchiveId}}, FreedBytes: r.FreedBytes}
	c.failed = res.Failed()
	if *asJSON {
		return printJSON(c.env.Stdout, res)
	}
	printApplied(c.env.Stdout, res)
	return nil
}

func (c *command) remoteMark(ctx context.Context, rc *remoteClient, name string, args []string) error {
	fs := newFlags(name, c.env)
	reason := fs.String("reason", "", "why (pin)")
	forDur := fs.String("for", "", "how long (lease), e.g. 2h or 3d")
	days := fs.Int("days", -1, "retention in days (0: never archive)")
	def := fs.Bool("default", false, "back to the configured retention")
	b, id, err := remoteID(name, fs, args)
	if err != nil {
		return err
	}
	key := id
	if b != "" {
		key = b + "/" + id
	}
	var httpResp *http.Response
	var body []byte
	msg := ""
	now := time.Now().UTC()
	switch name {
	case "touch":
		r, err := rc.api.ReportActivityWithResponse(ctx, id, &openapi.ReportActivityParams{Backend: b}, openapi.Activity{At: now})
		if err != nil {
			return check(err, nil, nil)
		}
		httpResp, body = r.HTTPResponse, r.Body
		msg = "activity recorded at " + now.Local().Format(time.RFC3339)
	case "pin":
		r, err := rc.api.PinRuntimeWithResponse(ctx, id, &openapi.PinRuntimeParams{Backend: b}, openapi.PinRequest{Reason: *reason})
		if err != nil {
			return check(err, nil, nil)
		}
		httpResp, body = r.HTTPResponse, r.Body
		msg = "pinned: never touched until unpinned"
	case "unpin":
		r, err := rc.api.UnpinRuntimeWithResponse(ctx, id, &openapi.UnpinRuntimeParams{Backend: b})
		if err != nil {
			return check(err, nil, nil)
		}
		httpResp, body = r.HTTPResponse, r.Body
		msg = "unpinned"
	case "lease":
		if *forDur == "" {
			return usagef("lease: --for DURATION is required")
		}
		d, err := config.ParseDuration(*forDur)
		if err != nil || d <= 0 {
			return usagef("lease: --for %q: not a positive duration", *forDur)
		}
		r, err := rc.api.LeaseRuntimeWithResponse(ctx, id, &openapi.LeaseRuntimeParams{Backend: b}, openapi.LeaseRequest{Until: now.Add(time.Duration(d))})
		if err != nil {
			return check(err, nil, nil)
		}
		httpResp, body = r.HTTPResponse, r.Body
		if r.JSON200 != nil {
			msg = "leased until " + r.JSON200.LeaseUntil.Local().Format(time.RFC3339)
			if r.JSON200.Capped {
				msg += " (capped by max_lifetime)"
			}
		}
	case "retention":
		var req []byte
		switch {
		case *def && *days >= 0:
			return usagef("retention: give --days N or --default, not both")
		case *def:
			req, msg = []byte(`{"default":true}`), "retention back to the configured default"
		case *days >= 0:
			req = []byte(fmt.Sprintf(`{"days":%d}`, *days))
			msg = fmt.Sprintf("retention set to %d days", *days)
			if *days == 0 {
				msg = "retention: never archived"
			}
		default:
			return usagef("retention: give --days N or --default")
		}
		r, err := rc.api.SetRetentionWithBodyWithResponse(ctx, id, &openapi.SetRetentionParams{Backend: b}, "application/json", strings.NewReader(string(req)))
		if err != nil {
			return check(err, nil, nil)
		}
		httpResp, body = r.HTTPResponse, r.Body
	default:
		return usagef("unknown command %q", name)
	}
	if err := check(nil, httpResp, body); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "%s: %s\n", key, msg)
	return nil
}
