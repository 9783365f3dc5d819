package server

import (
	"net/http"

	spec "github.com/reclaimer/reclaimer/api"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/views"
)

// api implements the generated server interface: each handler decodes its
// request, calls one operation of the application layer and writes its
// view (or its error, by category). Nothing else happens here.
type api struct{ d *Daemon }

var _ openapi.ServerInterface = (*api)(nil)

func ref(id, backendName, source string) ops.Ref {
	return ops.Ref{Name: id, Backend: backendName, Source: source}
}

// answer writes v, or err by its category.
func answer[T any](w http.ResponseWriter, status int, v T, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, v)
}

func (a *api) GetHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, views.Health{OK: true, Version: a.d.opts.Version})
}

func (a *api) GetOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := spec.JSON()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

func (a *api) GetStatus(w http.ResponseWriter, r *http.Request) {
	st, err := a.d.app.Status(r.Context())
	answer(w, http.StatusOK, st, err)
}

func (a *api) GetUsage(w http.ResponseWriter, r *http.Request, p openapi.GetUsageParams) {
	u, err := a.d.app.Usage(r.Context(), ops.UsageQuery{Since: p.Since, Path: p.Path, Points: p.Points})
	answer(w, http.StatusOK, u, err)
}

func (a *api) ListRuntimes(w http.ResponseWriter, r *http.Request, p openapi.ListRuntimesParams) {
	limit := p.Limit
	if limit == 0 {
		limit = 100
	}
	list, err := a.d.app.Runtimes(r.Context(), ops.RuntimeQuery{Backend: p.Backend, Source: p.Source, State: p.State,
		Cursor: p.Cursor, Limit: limit, Observe: p.Observe, Sizes: p.Sizes, Search: p.Q, Scheduled: p.Scheduled,
		Sort: string(p.Sort), Desc: p.Desc})
	answer(w, http.StatusOK, list, err)
}

func (a *api) GetRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.GetRuntimeParams) {
	rt, err := a.d.app.Runtime(r.Context(), ref(id, p.Backend, p.Source))
	answer(w, http.StatusOK, rt, err)
}

func (a *api) ExplainRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.ExplainRuntimeParams) {
	ex, err := a.d.app.Explain(r.Context(), ref(id, p.Backend, p.Source))
	answer(w, http.StatusOK, ex, err)
}

func (a *api) RegisterRuntime(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	reg, err := decodeRegistration(data)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := a.d.app.Register(r.Context(), ops.Registration{Backend: reg.Backend, Source: reg.Source, ID: reg.Id,
		Home: reg.Home, Workspaces: reg.Workspaces, Labels: reg.Labels, Conversations: reg.Conversations,
		AgentServerURL: reg.AgentServerUrl})
	answer(w, http.StatusOK, rt, err)
}

func (a *api) ReleaseRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.ReleaseRuntimeParams) {
	rel, err := a.d.app.Release(r.Context(), ref(id, p.Backend, p.Source), p.Conversation, p.Force)
	answer(w, http.StatusOK, rel, err)
}

func (a *api) ReportActivity(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.ReportActivityParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := decodeActivity(data)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := a.d.app.ReportActivity(r.Context(), ref(id, p.Backend, p.Source), body.At); err != nil {
		writeError(w, err)
		return
	}
	a.d.metrics.activity.Inc()
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) ReportActivityBatch(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r, maxBatchBody)
	if err != nil {
		writeError(w, err)
		return
	}
	batch, err := decodeActivityBatch(data)
	if err != nil {
		writeError(w, err)
		return
	}
	reports := make([]ops.ActivityReport, len(batch.Reports))
	for i, rep := range batch.Reports {
		reports[i] = ops.ActivityReport{Backend: rep.Backend, Source: rep.Source, ID: rep.Id, At: rep.At}
	}
	ans, err := a.d.app.ReportActivityBatch(r.Context(), reports)
	if err == nil {
		a.d.metrics.activity.Add(float64(ans.Accepted))
	}
	answer(w, http.StatusOK, ans, err)
}

func (a *api) TakeHold(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.TakeHoldParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, ttl, err := decodeHoldRequest(data)
	if err != nil {
		writeError(w, err)
		return
	}
	h, err := a.d.app.TakeHold(r.Context(), ref(id, p.Backend, p.Source), req.Holder, ttl)
	if err == nil {
		a.d.metrics.holdsTaken.Inc()
	}
	answer(w, http.StatusCreated, h, err)
}

func (a *api) RenewHold(w http.ResponseWriter, r *http.Request, id openapi.ID, holdID string, p openapi.RenewHoldParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	ttl, err := decodeHoldRenewal(data)
	if err != nil {
		writeError(w, err)
		return
	}
	h, err := a.d.app.RenewHold(r.Context(), ref(id, p.Backend, p.Source), holdID, ttl)
	answer(w, http.StatusOK, h, err)
}

func (a *api) ReleaseHold(w http.ResponseWriter, r *http.Request, id openapi.ID, holdID string, p openapi.ReleaseHoldParams) {
	if err := a.d.app.ReleaseHold(r.Context(), ref(id, p.Backend, p.Source), holdID); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// markOne runs one mark on one runtime and answers with the runtime.
func (a *api) markOne(w http.ResponseWriter, r *http.Request, req ops.MarkRequest) {
	m, err := a.d.app.Mark(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m[0].Runtime)
}

func (a *api) SetRetention(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.SetRetentionParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	ret, err := decodeRetention(data)
	if err != nil {
		writeError(w, err)
		return
	}
	a.markOne(w, r, ops.MarkRequest{Runtimes: []ops.Ref{ref(id, p.Backend, p.Source)}, Retention: ret, RetentionDefault: ret == nil})
}

func (a *api) PinRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.PinRuntimeParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	pin, err := decodePin(data)
	if err != nil {
		writeError(w, err)
		return
	}
	a.markOne(w, r, ops.MarkRequest{Runtimes: []ops.Ref{ref(id, p.Backend, p.Source)}, PinSet: true, Pin: pin.Reason})
}

func (a *api) UnpinRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.UnpinRuntimeParams) {
	a.markOne(w, r, ops.MarkRequest{Runtimes: []ops.Ref{ref(id, p.Backend, p.Source)}, Unpin: true})
}

// LeaseRuntime keeps a runtime until a time, never past its lifetime cap
// (the application layer's lease rule).
func (a *api) LeaseRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.LeaseRuntimeParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodeLease(data)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := a.d.app.Mark(r.Context(), ops.MarkRequest{Runtimes: []ops.Ref{ref(id, p.Backend, p.Source)}, LeaseUntil: req.Until})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, views.Lease{LeaseUntil: m[0].Runtime.LeaseUntil, Capped: m[0].Capped})
}

func (a *api) MarkRuntimes(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodeMarks(data)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := a.d.app.Mark(r.Context(), req)
	answer(w, http.StatusOK, openapi.MarkList{Marked: m}, err)
}

func (a *api) RestoreRuntime(w http.ResponseWriter, r *http.Request, id openapi.ID, p openapi.RestoreRuntimeParams) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodeRestore(data)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := a.d.app.Restore(r.Context(), ops.RestoreRequest{Runtime: ref(id, p.Backend, p.Source), ArchiveID: req.ArchiveId, To: req.To})
	answer(w, http.StatusOK, out, err)
}

func refsOf(names []string) []ops.Ref {
	out := make([]ops.Ref, len(names))
	for i, n := range names {
		out[i] = ops.Ref{Name: n}
	}
	return out
}

func (a *api) GetPlan(w http.ResponseWriter, r *http.Request, p openapi.GetPlanParams) {
	steps, err := checkSteps("step", p.Step)
	if err != nil {
		writeError(w, err)
		return
	}
	pl, err := a.d.app.Plan(r.Context(), ops.PlanRequest{Steps: steps, Runtimes: refsOf(p.Runtime)})
	answer(w, http.StatusOK, pl, err)
}

func (a *api) RunPass(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r, maxBatchBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, steps, err := decodePass(data)
	if err != nil {
		writeError(w, err)
		return
	}
	ar := ops.ApplyRequest{Steps: steps, Runtimes: refsOf(req.Runtimes), Delete: req.Delete, Announced: req.Announced,
		PlanID: req.PlanId, DryRun: req.DryRun, Trigger: "api"}
	if req.Plan.ID != "" {
		p := plan.Plan(req.Plan)
		ar.Plan = &p
	}
	pass, err := a.d.app.Apply(r.Context(), ar)
	answer(w, http.StatusOK, pass, err)
}

func (a *api) GetJournal(w http.ResponseWriter, r *http.Request, p openapi.GetJournalParams) {
	q := ops.JournalQuery{PlanID: p.PlanId, Before: p.Before, Limit: p.Limit}
	if p.Runtime != "" {
		rf := ref(p.Runtime, p.Backend, p.Source)
		q.Runtime = &rf
	}
	j, err := a.d.app.Journal(r.Context(), q)
	answer(w, http.StatusOK, j, err)
}

func (a *api) ListArchives(w http.ResponseWriter, r *http.Request, p openapi.ListArchivesParams) {
	list, err := a.d.app.Archives(r.Context(), p.Name)
	answer(w, http.StatusOK, openapi.ArchiveList{Archives: list}, err)
}

func (a *api) PruneArchives(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r, maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodePrune(data)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := a.d.app.Prune(r.Context(), req)
	answer(w, http.StatusOK, out, err)
}

func (a *api) GetNative(w http.ResponseWriter, r *http.Request) {
	rep, err := a.d.app.NativeReport(r.Context(), false)
	answer(w, http.StatusOK, rep, err)
}

func (a *api) SyncNative(w http.ResponseWriter, r *http.Request) {
	rep, err := a.d.app.NativeReport(r.Context(), true)
	answer(w, http.StatusOK, rep, err)
}
