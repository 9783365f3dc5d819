package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// Entry is one archive as listed.
type Entry struct {
	ID            string                 `json:"id"`
	Runtime       string                 `json:"runtime"`
	Backend       string                 `json:"backend"`
	Source        string                 `json:"source"`
	Conversations []string               `json:"conversations,omitempty"`
	CreatedAt     time.Time              `json:"created_at"`
	Location      string                 `json:"location"`
	Formats       []string               `json:"formats"`
	Bytes         int64                  `json:"bytes"`
	Objects       []ledger.ArchiveObject `json:"objects"`
	Base          string                 `json:"base,omitempty"`
	Head          string                 `json:"head,omitempty"`
	Branch        string                 `json:"branch,omitempty"`
	Remote        string                 `json:"remote,omitempty"`
	Survives      []string               `json:"survives"`
	Dependencies  []archive.Dependency   `json:"dependencies,omitempty"`
	Excluded      []string               `json:"excluded,omitempty"`
	Restore       string                 `json:"restore"`
}

// EntryOf describes a recorded archive. An archive recorded before
// manifests were stored whole shows what its record has.
func EntryOf(a ledger.Archive) Entry {
	e := Entry{ID: a.ID, Runtime: a.Key.ID, Backend: a.Key.Backend, Source: a.Key.Source, CreatedAt: a.CreatedAt, Location: a.Location,
		Formats: a.Formats, Bytes: a.Bytes, Objects: a.Objects,
		Restore: fmt.Sprintf("reclaimer restore %s --archive %s", a.Key, a.ID)}
	var m archive.Manifest
	if json.Unmarshal(a.Manifest, &m) == nil {
		e.Conversations, e.Base, e.Head, e.Branch, e.Remote = m.Conversations, m.Base, m.Head, m.Branch, m.Remote
		e.Survives, e.Dependencies, e.Excluded = m.Survives, m.Dependencies, m.Excluded
	}
	if e.Formats == nil {
		e.Formats = []string{}
	}
	if e.Objects == nil {
		e.Objects = []ledger.ArchiveObject{}
	}
	if e.Survives == nil {
		e.Survives = []string{}
	}
	return e
}

// SinkFor opens the sink holding an archive.
type SinkFor func(a ledger.Archive) (sink.Sink, error)

// StepPrune is the journal's step of a prune.
const StepPrune = "prune-archive"

// PruneAction is one archive a prune removes.
type PruneAction struct {
	ArchiveID string    `json:"archive_id"`
	Runtime   string    `json:"runtime"`
	Backend   string    `json:"backend"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	Bytes     int64     `json:"bytes"`
	Location  string    `json:"location"`
}

// PruneSkip is an old archive a prune keeps, and why.
type PruneSkip struct {
	ArchiveID string `json:"archive_id"`
	Runtime   string `json:"runtime"`
	Backend   string `json:"backend"`
	Source    string `json:"source"`
	Reason    string `json:"reason"`
}

// PrunePlan is the dry run of a prune.
type PrunePlan struct {
	ID        string        `json:"plan_id"`
	CreatedAt time.Time     `json:"created_at"`
	OlderThan string        `json:"older_than"`
	Cutoff    time.Time     `json:"cutoff"`
	Actions   []PruneAction `json:"actions"`
	Skipped   []PruneSkip   `json:"skipped"`
	Note      string        `json:"note"`
}

// Bytes is what the plan would free.
func (p *PrunePlan) Bytes() int64 {
	var n int64
	for _, a := range p.Actions {
		n += a.Bytes
	}
	return n
}

// PlanPrune selects the archives created before now-olderThan, oldest
// first. It reads the ledger only.
func PlanPrune(ctx context.Context, st ledger.Store, olderThan time.Duration, now time.Time) (*PrunePlan, error) {
	if olderThan <= 0 {
		return nil, errors.New("plan prune: the age must be positive")
	}
	all, err := st.ListArchives(ctx, ledger.Key{})
	if err != nil {
		return nil, fmt.Errorf("plan prune: %w", err)
	}
	p := &PrunePlan{ID: plan.NewID(now), CreatedAt: now.UTC(), OlderThan: olderThan.String(), Cutoff: now.Add(-olderThan).UTC(),
		Actions: []PruneAction{}, Skipped: []PruneSkip{}, Note: plan.Disclaimer}
	for i := len(all) - 1; i >= 0; i-- { // listed newest first
		a := all[i]
		if !a.CreatedAt.Before(p.Cutoff) {
			continue
		}
		if why := protected(ctx, st, a.Key, now); why != "" {
			p.Skipped = append(p.Skipped, PruneSkip{ArchiveID: a.ID, Runtime: a.Key.ID, Backend: a.Key.Backend, Source: a.Key.Source, Reason: why})
			continue
		}
		p.Actions = append(p.Actions, PruneAction{ArchiveID: a.ID, Runtime: a.Key.ID, Backend: a.Key.Backend, Source: a.Key.Source,
			CreatedAt: a.CreatedAt, Bytes: a.Bytes, Location: a.Location})
	}
	return p, nil
}

// protected says why a runtime's archives must stay ("" when they may go).
func protected(ctx context.Context, st ledger.Store, k ledger.Key, now time.Time) string {
	r, err := st.Runtime(ctx, k)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return ""
	case err != nil:
		return "cannot read the runtime's record: " + err.Error()
	case r.Pinned:
		return "the runtime is pinned"
	case r.LeaseUntil.After(now):
		return "the runtime is leased until " + r.LeaseUntil.Format(time.RFC3339)
	}
	return ""
}

// PruneResult is the outcome of one PruneAction.
type PruneResult struct {
	ArchiveID  string       `json:"archive_id"`
	Runtime    string       `json:"runtime"`
	Backend    string       `json:"backend"`
	Source     string       `json:"source"`
	Outcome    plan.Outcome `json:"outcome"`
	Reason     string       `json:"reason,omitempty"`
	FreedBytes int64        `json:"freed_bytes"`
}

// PruneApplied is the result of ApplyPrune.
type PruneApplied struct {
	PlanID     string        `json:"plan_id"`
	Results    []PruneResult `json:"results"`
	FreedBytes int64         `json:"freed_bytes"`
}

// Failed tells whether any archive could not be pruned.
func (a *PruneApplied) Failed() bool {
	for _, r := range a.Results {
		if r.Outcome == plan.Failed {
			return true
		}
	}
	return false
}

// ApplyPrune carries out p: for each archive, journal the intent, remove
// its objects and then its manifest from its sink, delete the ledger
// record (and the runtime's pointer to it), journal the outcome. It never
// prunes more than p says, and re-checks each archive first: one gone
// already or whose runtime was pinned or leased since is skipped.
func ApplyPrune(ctx context.Context, st ledger.Store, sinkFor SinkFor, p *PrunePlan, now func() time.Time) (*PruneApplied, error) {
	res := &PruneApplied{PlanID: p.ID, Results: []PruneResult{}}
	for _, a := range p.Actions {
		r := pruneOne(ctx, st, sinkFor, p, a, now)
		res.Results = append(res.Results, r)
		res.FreedBytes += r.FreedBytes
	}
	return res, nil
}

func pruneOne(ctx context.Context, st ledger.Store, sinkFor SinkFor, p *PrunePlan, a PruneAction, now func() time.Time) PruneResult {
	r := PruneResult{ArchiveID: a.ArchiveID, Runtime: a.Runtime, Backend: a.Backend, Source: a.Source}
	k := ledger.Key{Source: a.Source, Backend: a.Backend, ID: a.Runtime}
	rec, err := st.Archive(ctx, a.ArchiveID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		r.Outcome, r.Reason = plan.Skip, "changed since plan: already pruned"
		return r
	case err != nil:
		r.Outcome, r.Reason = plan.Failed, err.Error()
		return r
	}
	if why := protected(ctx, st, k, now()); why != "" {
		r.Outcome, r.Reason = plan.Skip, "changed since plan: "+why
		return r
	}
	intent, err := st.AppendIntent(ctx, ledger.Intent{PlanID: p.ID, Key: k, Step: StepPrune, Paths: []string{rec.Location},
		Reason: "archive " + rec.ID + " is older than " + p.OlderThan, At: now().UTC()})
	if err != nil {
		r.Outcome, r.Reason = plan.Failed, "journal intent: "+err.Error()
		return r
	}
	err = removeArchive(ctx, st, sinkFor, rec)
	out := ledger.Outcome{Result: ledger.ResultDone, FreedBytes: rec.Bytes, At: now().UTC()}
	r.Outcome, r.FreedBytes = plan.Done, rec.Bytes
	if err != nil {
		out = ledger.Outcome{Result: ledger.ResultFailed, Reason: err.Error(), At: now().UTC()}
		r.Outcome, r.Reason, r.FreedBytes = plan.Failed, err.Error(), 0
	}
	if jerr := st.RecordOutcome(ctx, intent, out); jerr != nil && err == nil {
		r.Reason = "pruned, but journaling the outcome failed: " + jerr.Error()
	}
	return r
}

// removeArchive removes the objects first and the manifest last (a
// manifest without objects is noticed by a verify; objects without a
// manifest would be lost track of), then the record.
func removeArchive(ctx context.Context, st ledger.Store, sinkFor SinkFor, rec ledger.Archive) error {
	s, err := sinkFor(rec)
	if err != nil {
		return fmt.Errorf("open the archive's storage: %w", err)
	}
	for _, o := range rec.Objects {
		if err := s.Remove(ctx, o.Name); err != nil {
			return err
		}
	}
	if m, err := archive.ParseManifest(rec.Manifest); err == nil {
		if err := s.Remove(ctx, archive.ManifestName(m.Name)); err != nil {
			return err
		}
	}
	if err := st.DeleteArchive(ctx, rec.ID); err != nil {
		return err
	}
	_, err = st.Update(ctx, rec.Key, func(r *ledger.RuntimeRecord) error {
		if r.ArchiveID == rec.ID {
			r.ArchiveID = ""
		}
		return nil
	})
	if errors.Is(err, ledger.ErrNotFound) {
		err = nil
	}
	return err
}
