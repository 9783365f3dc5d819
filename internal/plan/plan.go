package plan

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// Disclaimer is printed with every dry run.
const Disclaimer = "A dry run is a preview, not a promise: apply re-checks each runtime under its lock and skips what changed."

// Usage is one managed filesystem's usage when the plan was made.
type Usage struct {
	Path     string  `json:"path"`
	Fraction float64 `json:"fraction"`
	High     float64 `json:"high"`
	Low      float64 `json:"low"`
}

// Observed is what an action was based on.
type Observed struct {
	State        backend.State `json:"state"`
	LastActivity time.Time     `json:"last_activity,omitzero"`
	Fingerprint  string        `json:"fingerprint,omitempty"`
}

// Action is one step the plan proposes.
type Action struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend"`
	Source  string       `json:"source"`
	Step    backend.Step `json:"step"`
	Paths   []string     `json:"paths"`
	Bytes   int64        `json:"bytes"`
	// Code is the rule that proposed it (policy.Rule*); Reason its words.
	Code     policy.Code `json:"code"`
	Reason   string      `json:"reason"`
	Observed Observed    `json:"observed"`
	// Filesystem is the managed filesystem the bytes return to.
	Filesystem string `json:"filesystem,omitempty"`
	// NotKept is, for a step that archives first, what the archive will
	// not keep (a home's caches, a container's writable layer): said
	// before the step, not only in the archive after.
	NotKept []string `json:"not_kept,omitempty"`
}

// Key is the action's runtime key.
func (a Action) Key() backend.Key {
	return backend.Key{Source: a.Source, Backend: a.Backend, ID: a.Runtime}
}

// Skipped is a runtime a policy wanted to act on but may not.
type Skipped struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend"`
	Source  string       `json:"source"`
	Step    backend.Step `json:"step,omitempty"`
	Code    policy.Code  `json:"code"`
	Reason  string       `json:"reason"`
}

// Key is the skipped runtime's key.
func (s Skipped) Key() backend.Key {
	return backend.Key{Source: s.Source, Backend: s.Backend, ID: s.Runtime}
}

// Notice is a destructive step announced (or an announcement canceled).
type Notice struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend"`
	Source  string       `json:"source"`
	Step    backend.Step `json:"step"`
	Due     time.Time    `json:"due,omitzero"`
	Code    policy.Code  `json:"code,omitempty"`
	Reason  string       `json:"reason"`
	// NotKept is, for an announced step that archives first, what the
	// archive will not keep (as plan.Action's).
	NotKept []string `json:"not_kept,omitempty"`
}

// Key is the notice's runtime key.
func (n Notice) Key() backend.Key {
	return backend.Key{Source: n.Source, Backend: n.Backend, ID: n.Runtime}
}

// ProblemCode names a kind of problem: something a pass could not look
// at, or could not tell apart, that the operator must know about.
type ProblemCode string

const (
	// SourceUnreadable: the source's listing failed (a repository or root
	// that does not exist, an Engine or provider not answering, a
	// credential missing).
	SourceUnreadable ProblemCode = "source_unreadable"
	// SourceTimeout: listing took longer than the source's list_timeout
	// (a provider asking to wait, again and again).
	SourceTimeout ProblemCode = "source_timeout"
	// SourceEmpty: the source listed nothing while the ledger knows
	// runtimes of it still present: a selector that matches nothing, a
	// root emptied or unmounted.
	SourceEmpty ProblemCode = "source_empty"
	// SourceWarning: the source listed, but could not see everything (a
	// home no matched container mounts).
	SourceWarning ProblemCode = "source_warning"
	// LegacyAmbiguous: a ledger record from before keys carried their
	// source is listed by two sources; it is given to neither.
	LegacyAmbiguous ProblemCode = "legacy_ambiguous"
	// Unmeasured: a managed filesystem could not be measured.
	Unmeasured ProblemCode = "unmeasured"
	// SelectionFailed: the caches or dependencies of a runtime could not
	// be selected.
	SelectionFailed ProblemCode = "selection_failed"
	// NoSources: nothing is configured to manage.
	NoSources ProblemCode = "no_sources"
	// BadItem: a source listed an item that cannot be a runtime (no id,
	// an id that is not one path segment, a NUL byte): it is skipped,
	// and the rest of that source and every other source go on.
	BadItem ProblemCode = "bad_item"
	// ProviderClock: a provider reported a time reclaimer does not take
	// as it is (an activity or creation in the future, an activity before
	// the creation): its clock disagrees with ours; the time was clamped.
	ProviderClock ProblemCode = "provider_clock"
	// SourcePartial: the source listed, but a narrowed re-read of some
	// of its runtimes failed (a 503 on GET /runtimes/r1): those are
	// treated as busy in this pass, everything else goes on.
	SourcePartial ProblemCode = "source_partial"
	// PassTimeout: the pass reached its deadline ([server] pass_timeout)
	// with actions not done; they are left for the next pass.
	PassTimeout ProblemCode = "pass_timeout"
)

// Problem is something a pass could not look at. Every command that
// observes prints its problems on standard error and in its JSON, and
// exits 1 when there are any.
type Problem struct {
	Code ProblemCode `json:"code"`
	// Source is the source's stable name and Label the source as its
	// table was written (`[[worktrees]] repo = "/x"`), when the problem is
	// a source's.
	Source string `json:"source,omitempty"`
	Label  string `json:"label,omitempty"`
	// Backend and Runtime name the runtime, when it is one runtime's.
	Backend string `json:"backend,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	// Path is the filesystem, when it is one filesystem's.
	Path string `json:"path,omitempty"`
	// Message is the plain cause: "repository /x does not exist".
	Message string `json:"message"`
}

// String is the problem as one line: its label (or runtime, or path) and
// its cause.
func (p Problem) String() string {
	switch {
	case p.Label != "" && p.Runtime != "":
		return p.Label + ": " + p.Backend + "/" + p.Runtime + ": " + p.Message
	case p.Label != "":
		return p.Label + ": " + p.Message
	case p.Runtime != "":
		return p.Backend + "/" + p.Runtime + ": " + p.Message
	case p.Path != "":
		return p.Path + ": " + p.Message
	}
	return p.Message
}

// Plan is the dry run of one pass.
type Plan struct {
	ID        string    `json:"plan_id"`
	CreatedAt time.Time `json:"created_at"`
	Usage     []Usage   `json:"usage"`
	Actions   []Action  `json:"actions"`
	Skipped   []Skipped `json:"skipped"`
	Scheduled []Notice  `json:"scheduled,omitempty"`
	Canceled  []Notice  `json:"canceled,omitempty"`
	Messages  []string  `json:"messages,omitempty"`
	// Problems are what the pass could not look at; never omitted, so a
	// script sees an empty list rather than nothing.
	Problems []Problem `json:"problems"`
	// Seen counts the runtimes the pass observed, by backend and state,
	// so a plan with nothing to do still says what it looked at.
	Seen map[string]map[string]int `json:"seen,omitempty"`
	Note string                    `json:"note"`
}

// Bytes is the total the plan's actions would free.
func (p *Plan) Bytes() int64 {
	var n int64
	for _, a := range p.Actions {
		n += a.Bytes
	}
	return n
}

// Outcome of one applied action.
type Outcome string

const (
	Done    Outcome = "done"
	Skip    Outcome = "skipped"
	Failed  Outcome = "failed"
	Pending Outcome = "pending" // not reached (a stop or cancellation)
)

// Result is the outcome of one action.
type Result struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend"`
	Source  string       `json:"source"`
	Step    backend.Step `json:"step"`
	Outcome Outcome      `json:"outcome"`
	// Code says why an action was skipped or failed (ResultCode).
	Code       ResultCode `json:"code,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	FreedBytes int64      `json:"freed_bytes"`
	ArchiveID  string     `json:"archive_id,omitempty"`
	// Kept is what the archive it wrote keeps, and NotKept what it does
	// not (the rebuildable dependency folders, a container's home): what
	// a removal prints.
	Kept    []string `json:"kept,omitempty"`
	NotKept []string `json:"not_kept,omitempty"`
	// Noticed: the engine recorded this result's notice in the ledger
	// (an archive or delete, done or failed), which the webhooks' outbox
	// sends; the daemon sends the others from memory. Not in the JSON.
	Noticed bool `json:"-"`
}

// Key is the result's runtime key.
func (r Result) Key() backend.Key {
	return backend.Key{Source: r.Source, Backend: r.Backend, ID: r.Runtime}
}

// ResultCode names why an action was skipped, failed or left pending.
type ResultCode string

const (
	// ChangedSincePlan: the re-check under the runtime's lock found a
	// change (the reason says which).
	ChangedSincePlan ResultCode = "changed_since_plan"
	// LockedByAnother: another pass holds the runtime.
	LockedByAnother ResultCode = "locked"
	// BudgetMet: the disk budget was met by earlier actions.
	BudgetMet ResultCode = "budget_met"
	// Unsupported: the backend cannot take this step for this runtime
	// (errors.ErrUnsupported); nothing was done.
	Unsupported ResultCode = "unsupported"
	// Protected: a removal would lose unsaved work that cannot be archived.
	Protected ResultCode = "protected"
	// Stopped: the apply stopped before reaching it.
	Stopped ResultCode = "stopped"
	// Error: anything else that failed.
	Error ResultCode = "error"
)

// Applied is the result of applying a plan.
type Applied struct {
	PlanID     string   `json:"plan_id"`
	Results    []Result `json:"results"`
	FreedBytes int64    `json:"freed_bytes"`
	Messages   []string `json:"messages,omitempty"`
	// Problems are what the apply's own observation could not look at.
	Problems []Problem `json:"problems"`
	// Announced are the plan's Scheduled notices whose record committed
	// (for a shared source's runtime, under the leader's fence): the ones
	// announced (the daemon's outbox sends them from the ledger). A notice
	// not recorded is the next pass's (or the next leader's) to schedule
	// and announce, so announcing it now could announce it twice. Not in
	// the JSON.
	Announced []Notice `json:"-"`
}

// Failed tells whether any action failed.
func (a *Applied) Failed() bool {
	for _, r := range a.Results {
		if r.Outcome == Failed {
			return true
		}
	}
	return false
}

// NewID returns a fresh plan id: time-ordered and unique.
func NewID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Write saves p as JSON to path, atomically.
func Write(path string, p *Plan) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plan-*")
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write plan %q: %w", path, err)
	}
	return nil
}

// ErrInvalid reports a plan file that cannot be applied.
var ErrInvalid = errors.New("invalid plan")

// Read loads and checks a plan saved by Write.
func Read(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return Decode(data, path)
}

// Decode checks a plan as Write saved it (a file, or a body sent to the
// API); name is for messages.
func Decode(data []byte, path string) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("read plan %q: %w: %v", path, ErrInvalid, err)
	}
	if err := Check(&p, path); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check rejects a plan that cannot be applied: no id, an action without a
// runtime, backend, source or valid step, or a path that is not absolute
// and clean.
func Check(p *Plan, path string) error {
	if p.ID == "" {
		return fmt.Errorf("read plan %q: %w: no plan_id", path, ErrInvalid)
	}
	for i, a := range p.Actions {
		if a.Runtime == "" || a.Backend == "" || !a.Step.Valid() {
			return fmt.Errorf("read plan %q: %w: action %d has no runtime, backend or valid step", path, ErrInvalid, i)
		}
		if a.Source == "" {
			return fmt.Errorf("read plan %q: %w: action %d names no source (a plan of an older version: make a new one)", path, ErrInvalid, i)
		}
		for _, p := range a.Paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return fmt.Errorf("read plan %q: %w: action %d path %q is not absolute and clean", path, ErrInvalid, i, p)
			}
		}
	}
	return nil
}

// OneLine keeps a message to one line: a reason, a result, a table cell
// (git's errors carry several lines, which would break every table).
func OneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}
