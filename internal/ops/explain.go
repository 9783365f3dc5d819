package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/views"
)

// Explain is why one runtime is where it is: a dry run now (the same
// observation and policy code as a pass; the runtime itself observed fully
// and scanned for processes, as apply would), with every policy's verdict
// about it, what the next pass would do and when its next step is due.
func (a *App) Explain(ctx context.Context, ref Ref) (*views.Explain, error) {
	observed := false
	r, err := a.resolve(ctx, ref, &observed)
	if err != nil {
		return nil, err
	}
	k := r.key
	p, _, w, err := a.pass(ctx, PassRequest{Trigger: "explain", DryRun: true, Explain: k, Wait: a.holdWait()})
	if err != nil {
		return nil, fmt.Errorf("explain %s: %w", k, err)
	}
	rec, err := a.store.Runtime(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("explain %s: %w", k, err)
	}
	d, err := a.decorationsOf(ctx, k)
	if err != nil {
		return nil, err
	}
	x := w.Explained
	out := &views.Explain{ObservedAt: w.Now, Policies: []views.Verdict{}, PoliciesOff: []policy.Code{},
		Problems: []plan.Problem{}, Note: plan.Disclaimer,
		NextPass: views.NextPass{Actions: []plan.Action{}, Skipped: []plan.Skipped{}, Scheduled: []plan.Notice{}, Canceled: []plan.Notice{}}}
	out.Runtime = a.runtimeView(rec, x.Seen, d)
	out.Observation = observationView(out.Runtime, x, w.Filesystems)
	ex := x.Explanation
	if why := ex.Protection; !why.IsZero() {
		out.Protection = &views.Reason{Code: why.Code, Reason: why.Text}
	}
	for _, v := range ex.Verdicts {
		out.Policies = append(out.Policies, verdictView(v))
	}
	if ex.Off != nil {
		out.PoliciesOff = ex.Off
	}
	if ex.Next != nil {
		out.NextStep = &views.NextStep{Step: string(ex.Next.Step), Policy: ex.Next.Rule, Due: ex.Next.Due.UTC(), Reason: ex.Next.Reason.Text}
	}
	mine := func(runtime, be, source string) bool { return runtime == k.ID && be == k.Backend && source == k.Source }
	for _, act := range p.Actions {
		if mine(act.Runtime, act.Backend, act.Source) {
			out.NextPass.Actions = append(out.NextPass.Actions, act)
		}
	}
	for _, s := range p.Skipped {
		if mine(s.Runtime, s.Backend, s.Source) {
			out.NextPass.Skipped = append(out.NextPass.Skipped, s)
		}
	}
	for _, n := range p.Scheduled {
		if mine(n.Runtime, n.Backend, n.Source) {
			out.NextPass.Scheduled = append(out.NextPass.Scheduled, n)
		}
	}
	for _, n := range p.Canceled {
		if mine(n.Runtime, n.Backend, n.Source) {
			out.NextPass.Canceled = append(out.NextPass.Canceled, n)
		}
	}
	gone := ex.Gone
	if x.Seen == nil {
		// Not listed: archived, deleted or missing, or its source could
		// not be read (the problems say so).
		gone = policy.Reason{Code: policy.NotFound, Text: "its source did not list it in this pass (" + rec.State + ")"}
		if !backend.State(rec.State).Present() {
			gone = policy.Reason{Code: policy.AlreadyGone, Text: "already " + rec.State}
		}
	}
	out.NextPass.Summary = nextSummary(out.NextPass, gone)
	for _, pr := range p.Problems {
		// The pass's problems that concern it: its source's, and those of
		// no source (a filesystem that could not be measured).
		if (pr.Source == "" || pr.Source == k.Source) && (pr.Runtime == "" || pr.Runtime == k.ID) {
			out.Problems = append(out.Problems, pr)
		}
	}
	a.stateMu.Lock()
	out.NextPass.At = a.nextPass
	a.stateMu.Unlock()
	return out, nil
}

// observationView is what the policies were given of the runtime v.
func observationView(v views.Runtime, x *engine.Explained, fss []policy.Filesystem) views.Observation {
	o := views.Observation{State: v.State, LastActivity: v.LastActivity, LastActivityFrom: v.LastActivityFrom,
		CreatedAt: v.CreatedAt, SizeBytes: v.SizeBytes, BytesByStep: map[string]int64{}, Unsaved: v.Unsaved, Busy: v.Busy,
		Capabilities: []string{}}
	s := x.Seen
	if s == nil {
		return o
	}
	o.Listed = true
	o.ObservedActivity, o.ReportedActivity = s.Runtime.LastActivity, s.Activity
	for step, n := range x.BytesByStep {
		o.BytesByStep[string(step)] = n
	}
	if x.SizeBytes >= 0 {
		o.SizeBytes = x.SizeBytes
	}
	if c := x.Candidate; c != nil {
		for _, fs := range fss {
			if fs.ID == c.Filesystem {
				o.Filesystem = fs.Path
			}
		}
		for _, cap := range []struct {
			name string
			ok   bool
		}{{"suspend", c.Can.Suspend}, {"delete", c.Can.Delete}, {"export", c.Can.Export}, {"files", c.Can.Files}} {
			if cap.ok {
				o.Capabilities = append(o.Capabilities, cap.name)
			}
		}
	}
	return o
}

func verdictView(v policy.Verdict) views.Verdict {
	out := views.Verdict{Policy: v.Rule, Step: string(v.Step), Outcome: v.Outcome, Code: v.Reason.Code, Reason: v.Reason.Text}
	if !v.Due.IsZero() {
		out.Due = v.Due.UTC()
	}
	return out
}

// nextSummary says in words what the next pass does with the runtime.
func nextSummary(n views.NextPass, gone policy.Reason) string {
	var parts []string
	for _, a := range n.Actions {
		parts = append(parts, fmt.Sprintf("%s (%s)", a.Step, a.Code))
	}
	for _, s := range n.Scheduled {
		parts = append(parts, fmt.Sprintf("announce %s, due %s (%s)", s.Step, s.Due.UTC().Format(time.RFC3339), s.Code))
	}
	for _, c := range n.Canceled {
		parts = append(parts, fmt.Sprintf("withdraw the %s notice (%s)", c.Step, c.Reason))
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, "; ")
	case !gone.IsZero():
		return "nothing: " + gone.Text
	}
	var why []string
	for _, s := range n.Skipped {
		if !slices.Contains(why, s.Reason) {
			why = append(why, s.Reason)
		}
	}
	if len(why) > 0 {
		return "nothing: " + strings.Join(why, "; ")
	}
	return "nothing"
}
