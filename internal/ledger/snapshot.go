package ledger

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Snapshot is everything a ledger holds, read through the Store
// interface: what `reclaimer ledger copy` moves from one store to another
// and checks on both sides.
type Snapshot struct {
	Runtimes []RuntimeRecord
	Activity []Activity
	Holds    []Hold // expired ones included
	Archives []Archive
	Notices  []Notice
	Journal  []JournalEntry // oldest first
}

// ReadSnapshot reads every record of st.
func ReadSnapshot(ctx context.Context, st Store) (*Snapshot, error) {
	s := &Snapshot{}
	var after Key
	for {
		page, err := st.ListRuntimes(ctx, RuntimeFilter{After: after, Limit: 10000})
		if err != nil {
			return nil, fmt.Errorf("read runtimes: %w", err)
		}
		s.Runtimes = append(s.Runtimes, page...)
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].Key
	}
	acts, err := st.ActivityTimes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read activity: %w", err)
	}
	for _, k := range slices.SortedFunc(maps.Keys(acts), Key.Compare) {
		s.Activity = append(s.Activity, Activity{Key: k, At: acts[k]})
	}
	if s.Holds, err = st.ListHolds(ctx, HoldFilter{Now: MinTime}); err != nil {
		return nil, fmt.Errorf("read holds: %w", err)
	}
	if s.Archives, err = st.ListArchives(ctx, Key{}); err != nil {
		return nil, fmt.Errorf("read archives: %w", err)
	}
	if s.Notices, err = st.ListNotices(ctx, NoticeFilter{}); err != nil {
		return nil, fmt.Errorf("read notices: %w", err)
	}
	if s.Journal, err = st.ListJournal(ctx, JournalFilter{}); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	slices.SortFunc(s.Journal, func(a, b JournalEntry) int { return cmp.Compare(a.ID, b.ID) })
	return s, nil
}

// Rekey replaces every key k of the snapshot with to(k) (a fleet's local
// sources take their replica's name).
func (s *Snapshot) Rekey(to func(Key) Key) {
	for i := range s.Runtimes {
		s.Runtimes[i].Key = to(s.Runtimes[i].Key)
	}
	for i := range s.Activity {
		s.Activity[i].Key = to(s.Activity[i].Key)
	}
	for i := range s.Holds {
		s.Holds[i].Key = to(s.Holds[i].Key)
	}
	for i := range s.Archives {
		s.Archives[i].Key = to(s.Archives[i].Key)
	}
	for i := range s.Notices {
		s.Notices[i].Key = to(s.Notices[i].Key)
	}
	for i := range s.Journal {
		s.Journal[i].Intent.Key = to(s.Journal[i].Intent.Key)
	}
	slices.SortFunc(s.Runtimes, func(a, b RuntimeRecord) int { return a.Key.Compare(b.Key) })
	slices.SortFunc(s.Activity, func(a, b Activity) int { return a.Key.Compare(b.Key) })
}

// Counts are how many records of each kind the snapshot holds.
func (s *Snapshot) Counts() map[string]int {
	return map[string]int{"runtimes": len(s.Runtimes), "activity": len(s.Activity), "holds": len(s.Holds),
		"archives": len(s.Archives), "notices": len(s.Notices), "journal": len(s.Journal)}
}

// Empty reports whether the snapshot holds nothing.
func (s *Snapshot) Empty() bool {
	for _, n := range s.Counts() {
		if n > 0 {
			return false
		}
	}
	return true
}

// Digest is a SHA-256 of the snapshot in a canonical form (sorted, times
// in UTC with nanoseconds, empty lists and maps as absent, manifests
// re-encoded): two stores holding the same records have the same digest
// whatever their encodings.
func (s *Snapshot) Digest() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	put := func(v any) { _ = enc.Encode(v) }
	t := func(x time.Time) string {
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339Nano)
	}
	list := func(v []string) []string {
		if len(v) == 0 {
			return nil
		}
		return v
	}
	for _, r := range s.Runtimes {
		var ret *int64
		if r.RetentionOverride != nil {
			n := int64(*r.RetentionOverride)
			ret = &n
		}
		labels := r.Labels
		if len(labels) == 0 {
			labels = nil
		}
		put([]any{"runtime", r.Key, r.State, r.Path, r.Home, list(r.Workspaces), labels, r.SizeBytes, t(r.FirstSeen), t(r.LastSeen),
			r.Pinned, r.PinReason, t(r.LeaseUntil), ret, r.ScheduledStep, t(r.ScheduledDue), t(r.ScheduledAt), r.ArchiveID,
			list(r.Conversations), t(r.RegisteredAt), t(r.ReleasedAt)})
	}
	for _, a := range s.Activity {
		put([]any{"activity", a.Key, t(a.At)})
	}
	holds := slices.Clone(s.Holds)
	slices.SortFunc(holds, func(a, b Hold) int { return cmp.Compare(a.ID, b.ID) })
	for _, x := range holds {
		put([]any{"hold", x.ID, x.Key, x.Holder, t(x.TakenAt), t(x.ExpiresAt)})
	}
	archives := slices.Clone(s.Archives)
	slices.SortFunc(archives, func(a, b Archive) int { return cmp.Compare(a.ID, b.ID) })
	for _, a := range archives {
		var manifest any
		if len(a.Manifest) > 0 {
			_ = json.Unmarshal(a.Manifest, &manifest)
		}
		var objs []ArchiveObject
		if len(a.Objects) > 0 {
			objs = a.Objects
		}
		put([]any{"archive", a.ID, a.Key, t(a.CreatedAt), a.Location, list(a.Formats), a.Bytes, objs, manifest})
	}
	notices := slices.Clone(s.Notices)
	slices.SortFunc(notices, func(a, b Notice) int { return cmp.Compare(a.ID, b.ID) })
	for _, n := range notices {
		put([]any{"notice", n.ID, n.Key, n.Kind, n.Step, t(n.Due), t(n.At), n.Message})
	}
	for _, j := range s.Journal {
		in := j.Intent
		put([]any{"journal", j.ID, in.PlanID, in.Key, in.Step, list(in.Paths), in.Reason, t(in.At)})
		if o := j.Outcome; o != nil {
			put([]any{"outcome", j.ID, o.Result, o.Reason, o.FreedBytes, t(o.At)})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
