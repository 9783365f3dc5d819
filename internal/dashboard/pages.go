package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/views"
)

// overviewData is the overview: the status view.
type overviewData struct {
	Status *views.Status
	// Charts are the usage charts by filesystem path (absent: fewer than
	// two samples); ChartsError says why there are none when the usage
	// could not be read.
	Charts      map[string]*chart
	ChartsError string
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s *session) {
	st, err := d.opts.App.Status(r.Context())
	if err != nil {
		d.fail(w, r, s, 0, err)
		return
	}
	data := overviewData{Status: st}
	if u, err := d.opts.App.Usage(r.Context(), ops.UsageQuery{}); err != nil {
		data.ChartsError = err.Error()
	} else {
		data.Charts = chartsOf(u, d.opts.Clock.Now())
	}
	d.render(w, r, s, http.StatusOK, "overview", "Overview", data)
}

// chartsOf draws each filesystem's samples, extended towards full only
// when its forecast says it is growing.
func chartsOf(u *views.UsageHistory, now time.Time) map[string]*chart {
	charts := map[string]*chart{}
	for _, fs := range u.Filesystems {
		ps := make([]chartPoint, 0, len(fs.Samples))
		for _, p := range fs.Samples {
			ps = append(ps, chartPoint{At: p.At, Used: p.UsedBytes, Avail: p.AvailBytes})
		}
		var fullAt time.Time
		if f := fs.Forecast; f != nil && f.Growing {
			fullAt = f.FullAt
		}
		if c := drawUsage(ps, fs.High, fs.Low, fullAt, now); c != nil {
			charts[fs.Path] = c
		}
	}
	return charts
}

// runtimesData is the runtimes table: one page of the listing, and the
// filter and order it was asked for.
type runtimesData struct {
	List                   *views.RuntimeList
	Backend, State, Search string
	Sort                   string
	Desc                   bool
	// Backends and States are the values the filters offer (the status's).
	Backends, States []string
	Limit            int
	// Next is the link to the next page, if any.
	Next string
	// Query is the filter as a query string, for the sort links.
	Query string
}

// pageSize is how many runtimes one page of the table shows.
const pageSize = 200

func (d *Dashboard) runtimes(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	data := runtimesData{Backend: q.Get("backend"), State: q.Get("state"), Search: q.Get("q"), Sort: q.Get("sort"),
		Desc: q.Get("desc") == "1", Limit: pageSize}
	list, err := d.opts.App.Runtimes(r.Context(), ops.RuntimeQuery{Backend: data.Backend, State: data.State, Search: data.Search,
		Sort: data.Sort, Desc: data.Desc && data.Sort != "", Cursor: q.Get("cursor"), Limit: pageSize, Sizes: true})
	if err != nil {
		d.fail(w, r, s, 0, err)
		return
	}
	data.List = list
	if st, err := d.opts.App.Status(r.Context()); err == nil {
		data.Backends, data.States = keys(st.RuntimesByBackend), keys(st.RuntimesByState)
	}
	filter := url.Values{}
	for k, v := range map[string]string{"backend": data.Backend, "state": data.State, "q": data.Search} {
		if v != "" {
			filter.Set(k, v)
		}
	}
	data.Query = filter.Encode()
	if list.NextCursor != "" {
		next := url.Values{}
		for k, v := range filter {
			next[k] = v
		}
		next.Set("cursor", list.NextCursor)
		data.Next = "/runtimes?" + next.Encode()
	}
	d.render(w, r, s, http.StatusOK, "runtimes", "Runtimes", data)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// refOf names the runtime of a page or form: its exact key when given
// (source, backend, id), as the tables link it.
func refOf(v url.Values) (ops.Ref, bool) {
	id := v.Get("id")
	return ops.Ref{Name: id, Backend: v.Get("backend"), Source: v.Get("source")}, id != ""
}

// runtimeData is one runtime's page: its view, and its journal.
type runtimeData struct {
	Runtime *views.Runtime
	// Explain is every policy's verdict from a dry run now; ExplainError
	// says why there is none (the page then shows the ledger's view).
	Explain      *views.Explain
	ExplainError string
	Journal      *views.Journal
}

func (d *Dashboard) runtime(w http.ResponseWriter, r *http.Request, s *session) {
	ref, ok := refOf(r.URL.Query())
	if !ok {
		d.fail(w, r, s, http.StatusBadRequest, errNoRuntime)
		return
	}
	var data runtimeData
	ex, err := d.opts.App.Explain(r.Context(), ref)
	if err == nil {
		data.Explain, data.Runtime = ex, &ex.Runtime
	} else {
		rt, rerr := d.opts.App.Runtime(r.Context(), ref)
		if rerr != nil {
			d.fail(w, r, s, 0, rerr)
			return
		}
		data.Runtime, data.ExplainError = rt, err.Error()
	}
	rt := data.Runtime
	exact := ops.Ref{Name: rt.ID, Backend: rt.Backend, Source: rt.Source}
	if j, err := d.opts.App.Journal(r.Context(), ops.JournalQuery{Runtime: &exact, Limit: 20}); err == nil {
		data.Journal = j
	}
	d.render(w, r, s, http.StatusOK, "runtime", rt.Backend+"/"+rt.ID, data)
}

// scheduledData is every runtime with an archive or delete announced,
// soonest first.
type scheduledData struct {
	List *views.RuntimeList
}

func (d *Dashboard) scheduled(w http.ResponseWriter, r *http.Request, s *session) {
	list, err := d.opts.App.Runtimes(r.Context(), ops.RuntimeQuery{Scheduled: true, Sort: "due", Sizes: true})
	if err != nil {
		d.fail(w, r, s, 0, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "scheduled", "Scheduled", scheduledData{List: list})
}

type archivesData struct {
	Archives []views.Archive
	Name     string
}

func (d *Dashboard) archives(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.URL.Query().Get("name")
	list, err := d.opts.App.Archives(r.Context(), name)
	if err != nil {
		d.fail(w, r, s, 0, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "archives", "Archives", archivesData{Archives: list, Name: name})
}

// journalData is one page of the journal and its filter.
type journalData struct {
	Journal         *views.Journal
	Runtime, PlanID string
	// Next is the link to older entries; First to the newest.
	Next, First string
}

func (d *Dashboard) journal(w http.ResponseWriter, r *http.Request, s *session) {
	v := r.URL.Query()
	data := journalData{Runtime: v.Get("runtime"), PlanID: v.Get("plan")}
	q := ops.JournalQuery{PlanID: data.PlanID, Limit: 50}
	if data.Runtime != "" {
		q.Runtime = &ops.Ref{Name: data.Runtime, Backend: v.Get("backend"), Source: v.Get("source")}
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			d.fail(w, r, s, http.StatusBadRequest, ops.Input("before", "before %q is not an entry number", b))
			return
		}
		q.Before = n
	}
	j, err := d.opts.App.Journal(r.Context(), q)
	if err != nil {
		d.fail(w, r, s, 0, err)
		return
	}
	data.Journal = j
	filter := url.Values{}
	for _, k := range []string{"runtime", "backend", "source", "plan"} {
		if x := v.Get(k); x != "" {
			filter.Set(k, x)
		}
	}
	if q.Before != 0 {
		data.First = "/journal?" + filter.Encode()
	}
	if j.NextBefore != 0 {
		filter.Set("before", strconv.FormatInt(j.NextBefore, 10))
		data.Next = "/journal?" + filter.Encode()
	}
	d.render(w, r, s, http.StatusOK, "journal", "Journal", data)
}

// The changes: each names one runtime by its exact key and calls one
// operation.

func (d *Dashboard) pin(w http.ResponseWriter, r *http.Request, s *session) {
	ref, ok := refOf(r.PostForm)
	if !ok {
		done(w, r, "", errNoRuntime)
		return
	}
	reason := r.PostForm.Get("reason")
	if reason == "" {
		reason = "pinned from the dashboard"
	}
	m, err := d.opts.App.Mark(r.Context(), ops.MarkRequest{Runtimes: []ops.Ref{ref}, PinSet: true, Pin: reason})
	done(w, r, marked(ref, m), err)
}

func (d *Dashboard) unpin(w http.ResponseWriter, r *http.Request, s *session) {
	ref, ok := refOf(r.PostForm)
	if !ok {
		done(w, r, "", errNoRuntime)
		return
	}
	m, err := d.opts.App.Mark(r.Context(), ops.MarkRequest{Runtimes: []ops.Ref{ref}, Unpin: true})
	done(w, r, marked(ref, m), err)
}

func (d *Dashboard) lease(w http.ResponseWriter, r *http.Request, s *session) {
	ref, ok := refOf(r.PostForm)
	if !ok {
		done(w, r, "", errNoRuntime)
		return
	}
	m, err := d.opts.App.Mark(r.Context(), ops.MarkRequest{Runtimes: []ops.Ref{ref}, LeaseFor: LeaseFor})
	done(w, r, marked(ref, m), err)
}

func marked(ref ops.Ref, m []views.Marked) string {
	if len(m) == 0 {
		return ""
	}
	return m[0].Runtime.Backend + "/" + m[0].Runtime.ID + ": " + m[0].Message
}

// reclaim carries out the step announced for a runtime now.
func (d *Dashboard) reclaim(w http.ResponseWriter, r *http.Request, s *session) {
	ref, ok := refOf(r.PostForm)
	if !ok {
		done(w, r, "", errNoRuntime)
		return
	}
	p, err := d.opts.App.Apply(r.Context(), ops.ApplyRequest{Runtimes: []ops.Ref{ref}, Announced: true, Trigger: "dashboard"})
	if err != nil {
		done(w, r, "", err)
		return
	}
	msg := "nothing was done"
	failed := false
	if p.Applied != nil && len(p.Applied.Results) > 0 {
		res := p.Applied.Results[0]
		msg = res.Backend + "/" + res.Runtime + ": " + string(res.Step) + " " + string(res.Outcome)
		if res.Reason != "" {
			msg += " (" + res.Reason + ")"
		}
		failed = res.Outcome != "done"
	}
	setFlash(w, r, msg, failed)
	http.Redirect(w, r, back(r), http.StatusSeeOther)
}
