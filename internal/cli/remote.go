package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/views"
)

// remote is ops.Service over a running daemon's HTTP API: each operation
// is the endpoint whose handler calls the daemon's own ops.App, and its
// answer decodes into the same view.
type remote struct {
	api *openapi.ClientWithResponses
}

var _ ops.Service = (*remote)(nil)

func (c *command) dial() (*remote, error) {
	tok, err := c.readToken()
	if err != nil {
		return nil, err
	}
	base, hc := c.g.server, &http.Client{Timeout: 10 * time.Minute}
	if p, ok := strings.CutPrefix(c.g.server, "unix:"); ok {
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
		return nil, usagef("--server %q: %v", c.g.server, err)
	}
	return &remote{api: api}, nil
}

// readToken finds the token: --token-file, then [server] token_file of
// --config, then api.token next to the ledger (the daemon's default).
func (c *command) readToken() (string, error) {
	path := c.g.tokenFile
	if path == "" {
		cfg := config.Default()
		if c.g.config != "" {
			var err error
			if cfg, err = c.loadConfig(); err != nil {
				return "", err
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

// answer returns v once the daemon answered 2xx, else the error it
// answered, in its category.
func answer[T any](v *T, err error, resp *http.Response, body []byte) (*T, error) {
	if err != nil {
		return nil, fmt.Errorf("ask the daemon: %w", err)
	}
	if resp.StatusCode/100 == 2 && v != nil {
		return v, nil
	}
	var e openapi.Error
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		cat, ok := ops.CategoryOf(string(e.Error.Code))
		if !ok {
			cat = ops.CatInternal
		}
		return nil, &ops.RemoteError{Cat: cat, Field: e.Error.Field, Message: fmt.Sprintf("the daemon answered %d: %s", resp.StatusCode, e.Error.Message)}
	}
	return nil, &ops.RemoteError{Cat: ops.CatInternal, Message: "the daemon answered " + resp.Status}
}

func names(refs []ops.Ref) []string {
	if len(refs) == 0 {
		return nil
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Name
	}
	return out
}

func steps(s []backend.Step) []openapi.Step {
	if len(s) == 0 {
		return nil
	}
	out := make([]openapi.Step, len(s))
	for i, x := range s {
		out[i] = openapi.Step(x)
	}
	return out
}

func (r *remote) Plan(ctx context.Context, req ops.PlanRequest) (*views.Plan, error) {
	resp, err := r.api.GetPlanWithResponse(ctx, &openapi.GetPlanParams{Step: steps(req.Steps), Runtime: names(req.Runtimes)})
	if err != nil {
		return answer[views.Plan](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) Apply(ctx context.Context, req ops.ApplyRequest) (*views.Pass, error) {
	body := openapi.PassRequest{DryRun: req.DryRun, Steps: steps(req.Steps), Runtimes: names(req.Runtimes),
		Delete: req.Delete, Announced: req.Announced, PlanId: req.PlanID}
	if req.Plan != nil {
		body.Plan = *req.Plan
	}
	resp, err := r.api.RunPassWithResponse(ctx, body)
	if err != nil {
		return answer[views.Pass](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) Status(ctx context.Context) (*views.Status, error) {
	resp, err := r.api.GetStatusWithResponse(ctx)
	if err != nil {
		return answer[views.Status](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) Explain(ctx context.Context, ref ops.Ref) (*views.Explain, error) {
	resp, err := r.api.ExplainRuntimeWithResponse(ctx, ref.Name, &openapi.ExplainRuntimeParams{Backend: ref.Backend, Source: ref.Source})
	if err != nil {
		return answer[views.Explain](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

// Runtimes reads every page the query asks for (a page of 10,000 at a
// time when it asks for all).
func (r *remote) Runtimes(ctx context.Context, q ops.RuntimeQuery) (*views.RuntimeList, error) {
	limit := q.Limit
	if limit == 0 {
		limit = 10000
	}
	params := &openapi.ListRuntimesParams{Backend: q.Backend, Source: q.Source, State: q.State, Cursor: q.Cursor,
		Limit: limit, Observe: q.Observe, Sizes: q.Sizes, Q: q.Search, Scheduled: q.Scheduled,
		Sort: openapi.ListRuntimesParamsSort(q.Sort), Desc: q.Desc}
	out := &views.RuntimeList{Runtimes: []views.Runtime{}}
	for {
		resp, err := r.api.ListRuntimesWithResponse(ctx, params)
		if err != nil {
			return answer[views.RuntimeList](nil, err, nil, nil)
		}
		page, err := answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
		if err != nil {
			return nil, err
		}
		out.Runtimes = append(out.Runtimes, page.Runtimes...)
		if out.Problems == nil {
			out.Problems = page.Problems // the first page's observation
		}
		if q.Limit > 0 || page.NextCursor == "" {
			out.NextCursor = page.NextCursor
			return out, nil
		}
		params.Cursor, params.Observe = page.NextCursor, false // observed once is enough
	}
}

func (r *remote) Mark(ctx context.Context, req ops.MarkRequest) ([]views.Marked, error) {
	body := map[string]any{"runtimes": names(req.Runtimes)}
	switch {
	case req.PinSet:
		body["pin"] = map[string]string{"reason": req.Pin}
	case req.Unpin:
		body["unpin"] = true
	case !req.LeaseUntil.IsZero():
		body["lease"] = map[string]time.Time{"until": req.LeaseUntil}
	case req.LeaseFor > 0:
		body["lease_for"] = req.LeaseFor.String()
	case req.RetentionDefault:
		body["retention"] = map[string]bool{"default": true}
	case req.Retention != nil:
		if *req.Retention%(24*time.Hour) != 0 {
			return nil, usagef("retention through a daemon is given in whole days")
		}
		body["retention"] = map[string]int{"days": int(*req.Retention / (24 * time.Hour))}
	case req.Touch:
		body["touch"] = true
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := r.api.MarkRuntimesWithBodyWithResponse(ctx, "application/json", strings.NewReader(string(data)))
	if err != nil {
		_, err = answer[openapi.MarkList](nil, err, nil, nil)
		return nil, err
	}
	list, err := answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
	if err != nil {
		return nil, err
	}
	return list.Marked, nil
}

func (r *remote) Journal(ctx context.Context, q ops.JournalQuery) (*views.Journal, error) {
	params := &openapi.GetJournalParams{Limit: q.Limit, Before: q.Before, PlanId: q.PlanID}
	if q.Runtime != nil {
		params.Runtime, params.Backend, params.Source = q.Runtime.Name, q.Runtime.Backend, q.Runtime.Source
	}
	resp, err := r.api.GetJournalWithResponse(ctx, params)
	if err != nil {
		return answer[views.Journal](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) Archives(ctx context.Context, name string) ([]views.Archive, error) {
	resp, err := r.api.ListArchivesWithResponse(ctx, &openapi.ListArchivesParams{Name: name})
	if err != nil {
		_, err = answer[openapi.ArchiveList](nil, err, nil, nil)
		return nil, err
	}
	list, err := answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
	if err != nil {
		return nil, err
	}
	return list.Archives, nil
}

func (r *remote) Prune(ctx context.Context, req ops.PruneRequest) (*views.Prune, error) {
	resp, err := r.api.PruneArchivesWithResponse(ctx, openapi.PruneRequest{OlderThan: req.OlderThanText, DryRun: req.DryRun})
	if err != nil {
		return answer[views.Prune](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) Restore(ctx context.Context, req ops.RestoreRequest) (*views.Restored, error) {
	resp, err := r.api.RestoreRuntimeWithResponse(ctx, req.Runtime.Name, &openapi.RestoreRuntimeParams{Backend: req.Runtime.Backend, Source: req.Runtime.Source},
		openapi.RestoreRequest{ArchiveId: req.ArchiveID, To: req.To})
	if err != nil {
		return answer[views.Restored](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

func (r *remote) NativeReport(ctx context.Context, sync bool) (*views.NativeReport, error) {
	if sync {
		resp, err := r.api.SyncNativeWithResponse(ctx)
		if err != nil {
			return answer[views.NativeReport](nil, err, nil, nil)
		}
		return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
	}
	resp, err := r.api.GetNativeWithResponse(ctx)
	if err != nil {
		return answer[views.NativeReport](nil, err, nil, nil)
	}
	return answer(resp.JSON200, nil, resp.HTTPResponse, resp.Body)
}

// Drain: the daemon purges its trash on its own.
func (r *remote) Drain(context.Context) error { return nil }

func (r *remote) Close() error { return nil }
