package ops

import (
	"context"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/views"
)

// JournalQuery selects journal entries, newest first.
type JournalQuery struct {
	// Runtime narrows to one runtime's entries.
	Runtime *Ref
	PlanID  string
	// Before continues a listing (NextBefore of the previous page).
	Before int64
	// Limit bounds a page; 0 means 50.
	Limit int
}

// Journal is the audit log of actions, newest first.
func (a *App) Journal(ctx context.Context, q JournalQuery) (*views.Journal, error) {
	switch {
	case q.Limit == 0:
		q.Limit = 50
	case q.Limit < 0 || q.Limit > 10000:
		return nil, Input("limit", "limit %d: between 1 and 10000", q.Limit)
	}
	if q.Before < 0 {
		return nil, Input("before", "before %d: must be positive", q.Before)
	}
	f := ledger.JournalFilter{PlanID: q.PlanID, Before: q.Before, Limit: q.Limit}
	if q.Runtime != nil {
		ks, err := a.resolveKeys(ctx, "runtime", []Ref{*q.Runtime})
		if err != nil {
			return nil, err
		}
		f.Key = ks[0]
	}
	entries, err := a.store.ListJournal(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &views.Journal{Entries: make([]views.JournalEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, journalView(e))
	}
	if len(entries) == q.Limit {
		out.NextBefore = entries[len(entries)-1].ID
	}
	return out, nil
}

func journalView(e ledger.JournalEntry) views.JournalEntry {
	in := e.Intent
	v := views.JournalEntry{ID: e.ID, PlanID: in.PlanID, Source: in.Key.Source, Backend: in.Key.Backend, Runtime: in.Key.ID,
		Step: in.Step, Paths: in.Paths, Reason: in.Reason, At: in.At}
	if o := e.Outcome; o != nil {
		v.Outcome = &views.JournalOutcome{Result: o.Result, Reason: o.Reason, FreedBytes: o.FreedBytes, At: o.At}
	}
	return v
}
