package plan

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
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
	Runtime  string       `json:"runtime"`
	Backend  string       `json:"backend"`
	Step     backend.Step `json:"step"`
	Paths    []string     `json:"paths"`
	Bytes    int64        `json:"bytes"`
	Reason   string       `json:"reason"`
	Observed Observed     `json:"observed"`
	// Filesystem is the managed filesystem the bytes return to.
	Filesystem string `json:"filesystem,omitempty"`
}

// Key is the action's runtime key.
func (a Action) Key() backend.Key { return backend.Key{Backend: a.Backend, ID: a.Runtime} }

// Skipped is a runtime a policy wanted to act on but may not.
type Skipped struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend,omitempty"`
	Step    backend.Step `json:"step,omitempty"`
	Reason  string       `json:"reason"`
}

// Notice is a destructive step announced (or an announcement canceled).
type Notice struct {
	Runtime string       `json:"runtime"`
	Backend string       `json:"backend"`
	Step    backend.Step `json:"step"`
	Due     time.Time    `json:"due,omitzero"`
	Reason  string       `json:"reason"`
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
	Runtime    string       `json:"runtime"`
	Backend    string       `json:"backend"`
	Step       backend.Step `json:"step"`
	Outcome    Outcome      `json:"outcome"`
	Reason     string       `json:"reason,omitempty"`
	FreedBytes int64        `json:"freed_bytes"`
	ArchiveID  string       `json:"archive_id,omitempty"`
}

// Applied is the result of applying a plan.
type Applied struct {
	PlanID     string   `json:"plan_id"`
	Results    []Result `json:"results"`
	FreedBytes int64    `json:"freed_bytes"`
	Messages   []string `json:"messages,omitempty"`
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
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("read plan %q: %w: %v", path, ErrInvalid, err)
	}
	if p.ID == "" {
		return nil, fmt.Errorf("read plan %q: %w: no plan_id", path, ErrInvalid)
	}
	for i, a := range p.Actions {
		if a.Runtime == "" || a.Backend == "" || !a.Step.Valid() {
			return nil, fmt.Errorf("read plan %q: %w: action %d has no runtime, backend or valid step", path, ErrInvalid, i)
		}
		for _, p := range a.Paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return nil, fmt.Errorf("read plan %q: %w: action %d path %q is not absolute and clean", path, ErrInvalid, i, p)
			}
		}
	}
	return &p, nil
}
