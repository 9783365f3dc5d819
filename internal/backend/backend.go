package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/sink"
)

// Error categories shared by every backend, the ledger, the engine and the
// application layer; the edges map each to an exit code and an HTTP status
// (ops.Classify), nowhere else.
var (
	ErrNotFound  = errors.New("not found")
	ErrBusy      = errors.New("busy")
	ErrConflict  = errors.New("conflict")
	ErrProtected = errors.New("protected")
	// ErrUnavailable is a provider or service that did not answer usefully
	// (429 or 5xx after every retry, no connection, a credential missing).
	ErrUnavailable = errors.New("provider unavailable")
)

// Key names a runtime: the source that found it (its stable name, see
// sources), the backend's name and the runtime's ID within that backend.
// It is the one key type: the ledger's records, locks, plans and the API
// all use it. Two sources of one backend (two [[http]] orchestrators) may
// both have a runtime "dev": their keys differ by Source, and nothing done
// to one (a pin, a lease, a re-check before removal) ever applies to the
// other.
//
// Source is empty only in ledger records written before keys carried their
// source (ledger schema 1); the engine gives each such record to the one
// source that lists it (ledger.Adopter).
type Key struct {
	Source  string `json:"source"`
	Backend string `json:"backend"`
	ID      string `json:"id"`
}

// String is "backend/ID", the name people know a runtime by. It is not
// unique across sources: use the Key itself (or Unique) to tell apart.
func (k Key) String() string { return k.Backend + "/" + k.ID }

// Unique is "backend/ID@source", unique across sources (lock files, log
// lines that must not mix two runtimes up).
func (k Key) Unique() string { return k.Backend + "/" + k.ID + "@" + k.Source }

// IsZero reports whether k is the zero Key. Filters use the zero Key to mean
// "every runtime".
func (k Key) IsZero() bool { return k == Key{} }

// Compare orders keys by backend, source, then ID: the order in which
// stores list runtimes and the order pagination cursors follow.
func (k Key) Compare(other Key) int {
	return cmp.Or(cmp.Compare(k.Backend, other.Backend), cmp.Compare(k.Source, other.Source), cmp.Compare(k.ID, other.ID))
}

// Validate rejects a key with an empty backend or ID, or with a NUL byte
// anywhere (stores and cursors use it as a separator).
func (k Key) Validate() error {
	if k.Backend == "" || k.ID == "" {
		return fmt.Errorf("invalid key %q: backend and id must not be empty", k.Unique())
	}
	if strings.ContainsRune(k.Source+k.Backend+k.ID, 0) {
		return fmt.Errorf("invalid key %q: NUL byte", k.Unique())
	}
	return nil
}

// Warnings is what a listing could not see although it listed the rest
// (a home no matched container mounts): List returns it as its error
// together with the runtimes it found, and the engine reports each line as
// a problem of the source instead of failing the listing.
type Warnings []string

func (w Warnings) Error() string { return strings.Join(w, "; ") }

// State is what a runtime is doing, as far as its backend can tell.
type State string

const (
	StateRunning   State = "running"   // in use: a container running, a process inside
	StateStarting  State = "starting"  // on its way to running
	StateStopped   State = "stopped"   // files kept, nothing running
	StateSuspended State = "suspended" // paused or stopped by reclaimer or a provider
	StateArchived  State = "archived"  // removed after a verified archive; record kept
	StateDeleted   State = "deleted"   // removed on request; record kept
	StateMissing   State = "missing"   // gone behind our back
	// StateUnowned is a managed folder no runtime claims (a container's
	// host folder left behind): present, idle, under the policies of a
	// stopped runtime.
	StateUnowned State = "unowned"
	StateUnknown State = "unknown"
)

// Active tells whether the state forbids every step but a lifetime cap.
func (s State) Active() bool { return s == StateRunning || s == StateStarting }

// Present tells whether the runtime still exists on its backend.
func (s State) Present() bool {
	return s != StateArchived && s != StateDeleted && s != StateMissing
}

// Step is one thing done to a runtime, in rising order of cost to its user.
type Step string

const (
	StepCaches       Step = "caches"
	StepDependencies Step = "dependencies"
	StepSuspend      Step = "suspend"
	StepArchive      Step = "archive"
	StepDelete       Step = "delete"
)

// Steps lists every step in rising order of cost.
var Steps = []Step{StepCaches, StepDependencies, StepSuspend, StepArchive, StepDelete}

// Rank orders steps by cost: caches 1 ... delete 5; 0 for an unknown step.
func (s Step) Rank() int {
	for i, t := range Steps {
		if t == s {
			return i + 1
		}
	}
	return 0
}

// Valid tells whether s is a known step.
func (s Step) Valid() bool { return s.Rank() > 0 }

// Destructive steps remove a runtime; they need notice and, with unsaved
// work, a verified archive.
func (s Step) Destructive() bool { return s == StepArchive || s == StepDelete }

// Runtime is what a backend observed of one runtime.
type Runtime struct {
	// Key: backends fill Backend and ID; the engine sets Source.
	Key
	State State `json:"state"`
	// Path is the runtime's own folder on this host, if it has one.
	Path string `json:"path,omitempty"`
	// Root is the managed root holding Path: the only place its files may
	// be touched, and where its trash lives.
	Root       string   `json:"root,omitempty"`
	Home       string   `json:"home,omitempty"`
	Workspaces []string `json:"workspaces,omitempty"`
	// LastActivity is the backend's own idea of the last use (newest file
	// change, provider activity); zero when it has none.
	LastActivity time.Time         `json:"last_activity,omitzero"`
	CreatedAt    time.Time         `json:"created_at,omitzero"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Pinned, when set, says why the backend itself protects the runtime
	// (a `git worktree lock`, say). It is treated as a pin.
	Pinned string `json:"pinned,omitempty"`
	// Busy, when set, says why the runtime is in use right now (a process
	// inside it).
	Busy string `json:"busy,omitempty"`
	// Unsaved describes work a removal would lose without an archive
	// (uncommitted changes, commits on no remote); empty when none.
	Unsaved string `json:"unsaved,omitempty"`
	// Unarchivable names state the backend cannot archive and restore
	// exactly (a merge in progress, a checked-out submodule): a runtime
	// with any is never archived or deleted, and the plan says why.
	Unarchivable string `json:"unarchivable,omitempty"`
	// Orphan, when set, says why the backend itself knows that nothing
	// owns the runtime any more (a container whose agent-server has no
	// record of it): the orphan sweep deletes it after the grace period,
	// as it does the unregistered runtimes of a registered_only source.
	Orphan string `json:"orphan,omitempty"`
	// Merged, when set, says why commits on no remote are not unsaved:
	// they are in the repository's default branch ("merged into main").
	Merged string `json:"merged,omitempty"`
	// Storage is a path on the filesystem that holds what the runtime
	// keeps outside its managed root (Docker's data root, where a
	// container's writable layer lives); that filesystem is managed for
	// the disk budget too. StorageBytes is what it holds there (0 unknown).
	Storage      string `json:"storage,omitempty"`
	StorageBytes int64  `json:"storage_bytes,omitempty"`
	// Fingerprint changes whenever what an action relies on changes (paths,
	// HEAD, last activity); apply compares it with the plan's.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Native, when the listing already carried the provider's own timers
	// (Daytona's list does), is what NativeLifecycle would read; nil
	// otherwise. It saves one request a runtime on every pass.
	Native *Lifecycle `json:"native,omitempty"`
	// AgentServer, when the backend knows it, is the runtime's OpenHands
	// agent-server (an OpenHands Cloud sandbox's AGENT_SERVER URL), whose
	// idle clock may refine LastActivity while the runtime runs (package
	// agentserver). Nil when unknown.
	AgentServer *AgentServer `json:"agent_server,omitempty"`
}

// AgentServer is where a runtime's OpenHands agent-server answers, and the
// session key it wants (X-Session-API-Key). The key never leaves the
// process: it is not marshalled, and it prints as "[redacted]".
type AgentServer struct {
	URL        string `json:"url"`
	SessionKey string `json:"-"`
}

// Format prints the URL only, whatever the verb, so a log line or an error
// that picks an AgentServer up shows no key.
func (a AgentServer) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "agent-server %s", a.URL)
	if a.SessionKey != "" {
		fmt.Fprint(f, " (session key [redacted])")
	}
}

// Backend is any backend; its roles are discovered with As.
type Backend interface {
	// Name is the backend's name as it appears in keys: "worktree", "dir".
	Name() string
}

// ListOptions narrow a listing.
type ListOptions struct {
	// IDs, when set, lists only these runtimes (apply re-observes one).
	IDs []string
	// Light skips what costs a walk of each runtime's files or a call to
	// git: LastActivity, Fingerprint and Unsaved are left empty. The
	// engine asks for it where no policy needs them, and observes the
	// runtimes it acts on fully.
	Light bool
}

// Lister lists the runtimes a backend knows.
type Lister interface {
	List(ctx context.Context, opts ListOptions) ([]Runtime, error)
}

// SuspendOptions say how to suspend.
type SuspendOptions struct{ Reason string }

// Suspender stops or pauses a runtime, keeping its files.
type Suspender interface {
	Suspend(ctx context.Context, rt Runtime, opts SuspendOptions) error
}

// DeleteOptions say how to delete.
type DeleteOptions struct {
	// Discard moves a local folder into the trash (a rename); the backend
	// must not delete files any other way. A path that is gone fails with
	// an error wrapping ErrNotFound: a backend that wraps it (%w) reports
	// a vanished runtime the way the contract wants.
	Discard func(path string) error
	// Step is the step this removal carries out: StepDelete, or
	// StepArchive for retention. A provider that keeps a restorable copy of
	// the whole runtime in its own cold storage (Daytona's archive) moves
	// the runtime there for StepArchive instead of deleting it: nothing is
	// lost, so no export is needed.
	Step Step
}

// Deleter removes a runtime.
type Deleter interface {
	Delete(ctx context.Context, rt Runtime, opts DeleteOptions) error
}

// File is one folder or file a FileReclaimer can free.
type File struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	// Kept, when set, says why a folder that looks like a candidate (an
	// ignored folder of a workspace) is kept: it is listed so the plan can
	// say so, and never discarded.
	Kept string `json:"kept,omitempty"`
}

// Shed returns the files that may go: those not Kept.
func Shed(files []File) []File {
	var out []File
	for _, f := range files {
		if f.Kept == "" {
			out = append(out, f)
		}
	}
	return out
}

// FileOptions select or free rebuildable files.
type FileOptions struct {
	Step Step // StepCaches or StepDependencies
	// CacheDirs are the cache folders relative to a home (StepCaches).
	CacheDirs []string
	// Paths, when set, are the files a plan chose: the backend re-checks
	// each against its rules and discards only those that still qualify.
	// When empty the backend only selects and returns candidates.
	Paths []string
	// Discard moves a path into the trash; required with Paths.
	Discard func(path string) error
	// Rebuildable and Keep are the dependencies step's rule (the source's
	// rebuildable and keep policy keys); nil: the built-in lists.
	Rebuildable, Keep []string
}

// FileReclaimer selects and frees the rebuildable files of an idle runtime.
type FileReclaimer interface {
	ReclaimFiles(ctx context.Context, rt Runtime, opts FileOptions) ([]File, error)
}

// ExportOptions say where an archive goes.
type ExportOptions struct {
	// Dir is a private local folder for temporary files (a git bundle
	// before it is stored); the engine removes it afterwards.
	Dir string
	// Sink stores the archive's objects, named Name.<ext> (Name is
	// "<backend>/<runtime>/<timestamp>", see archive.ObjectBase).
	Sink sink.Sink
	Name string
	// IncludeDependencies keeps rebuildable dependency folders in tars.
	IncludeDependencies bool
	// ExcludeHome leaves the runtime's home out ([archive] include_home =
	// false); by default it is kept, less CacheDirs and core dumps, which
	// are never archived.
	ExcludeHome bool
	// CacheDirs are the source's cache folders (relative to the home).
	CacheDirs []string
	// Rebuildable and Keep are the source's rule for which ignored folders
	// are rebuildable (left out of archives); nil: the built-in lists.
	Rebuildable, Keep []string
	// Conversations are the runtime's conversations, for the manifest.
	Conversations []string
	// CreatedAt is the archive's time (the plan's).
	CreatedAt time.Time
}

// ArchiveObject is one stored object of an archive.
type ArchiveObject struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Export is what an Exporter wrote and verified.
type Export struct {
	// Location is where the archive's manifest is (a path, an s3:// URL).
	Location string   `json:"location"`
	Formats  []string `json:"formats"`
	Bytes    int64    `json:"bytes"`
	// Objects are the stored objects, the manifest not included.
	Objects []ArchiveObject `json:"objects,omitempty"`
	// Survives says in plain words what the archive keeps.
	Survives []string `json:"survives"`
	// Restore tells how to bring it back (for the record).
	Restore string `json:"restore,omitempty"`
	// Manifest is the archive's manifest (archive.Manifest as JSON), kept
	// in the ledger with the record.
	Manifest json.RawMessage `json:"manifest,omitempty"`
}

// Exporter writes what a user could want back, verified by reading it back.
type Exporter interface {
	Export(ctx context.Context, rt Runtime, opts ExportOptions) (Export, error)
}

// LockOptions say what the lock is for.
type LockOptions struct{ Step Step }

// Lock is a held runtime lock with what the backend saw under it.
type Lock struct {
	// Runtime is the runtime re-observed under the lock.
	Runtime Runtime
	Unlock  func()
}

// Locker holds a runtime still while a step runs and re-observes it.
type Locker interface {
	Lock(ctx context.Context, rt Runtime, opts LockOptions) (Lock, error)
}

// Lifecycle is a provider's own idle and expiry settings (zero: off).
type Lifecycle struct {
	// IdleSuspend suspends the runtime after this long without activity.
	IdleSuspend time.Duration `json:"idle_suspend,omitzero"`
	// IdlePause pauses the runtime, memory kept, after this long without
	// activity: a cheaper suspend some providers have besides their stop
	// (Daytona's auto-pause of VM sandboxes).
	IdlePause time.Duration `json:"idle_pause,omitzero"`
	// Archive moves a suspended runtime to the provider's cold storage
	// (files kept) this long after it was suspended.
	Archive time.Duration `json:"archive,omitzero"`
	// Delete removes a suspended runtime this long after it was
	// suspended; Immediately means at the moment it is suspended.
	Delete time.Duration `json:"delete,omitzero"`
	// Deadline is an absolute timer (E2B's end of timeout): the provider
	// acts at that moment whatever the activity, and DeadlineStep says
	// what it does then (StepSuspend or StepDelete). Writing a Deadline
	// moves the timer; its step is fixed when the runtime is created.
	Deadline     time.Time `json:"deadline,omitzero"`
	DeadlineStep Step      `json:"deadline_step,omitempty"`
	// Can names the settings the provider lets reclaimer change for this
	// runtime: TimerIdleSuspend, TimerIdlePause, TimerArchive, TimerDelete,
	// TimerDeadline and TimerTouch. Set on reads; ignored on writes. Empty: the settings
	// can only be read (fixed at creation).
	Can []string `json:"can,omitempty"`
}

// Immediately is a Lifecycle delay that acts at once (Daytona's
// auto-delete interval 0: delete upon stopping).
const Immediately = time.Duration(1)

// Names of the native settings, in Lifecycle.Can.
const (
	TimerIdleSuspend = "idle_suspend"
	TimerIdlePause   = "idle_pause"
	TimerArchive     = "archive"
	TimerDelete      = "delete"
	TimerDeadline    = "deadline"
	// TimerTouch: the provider's idle timer can be restarted by recording
	// activity (LifecycleOptions.Touch).
	TimerTouch = "touch"
)

// LifecycleOptions read or write native settings.
type LifecycleOptions struct {
	// Set, when not nil, writes these settings: only those in the
	// runtime's Can, and only those that differ from what the provider
	// has; nil reads.
	Set *Lifecycle
	// Touch records activity with the provider now, so that its idle timer
	// starts again (a lease or hold in the ledger protects the runtime).
	// It never starts or resumes a suspended runtime.
	Touch bool
	// Current, when set, is what the caller read already (a listing's
	// Runtime.Native): the backend does not read the settings again.
	Current *Lifecycle
}

// NativeLifecycle reads and writes a provider's own lifecycle settings.
type NativeLifecycle interface {
	Lifecycle(ctx context.Context, rt Runtime, opts LifecycleOptions) (Lifecycle, error)
}

// NativeExplainer says in words what a provider's own settings are and
// what reclaimer can do with them (server-wide only, fixed at creation,
// written into a field): native plan shows it on each of its runtimes, and
// as the reason a drift is only reported.
type NativeExplainer interface {
	NativeExplanation() string
}

// Wrapper is implemented by decorators so As can see through them.
type Wrapper interface {
	Unwrap() Backend
}

// As returns b's implementation of role T, looking through decorators.
func As[T any](b Backend) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}

// Capabilities names the roles b implements, in a fixed order, for status
// output and the capability table tests.
func Capabilities(b Backend) []string {
	var caps []string
	add := func(ok bool, name string) {
		if ok {
			caps = append(caps, name)
		}
	}
	_, ok := As[Lister](b)
	add(ok, "Lister")
	_, ok = As[Suspender](b)
	add(ok, "Suspender")
	_, ok = As[Deleter](b)
	add(ok, "Deleter")
	_, ok = As[FileReclaimer](b)
	add(ok, "FileReclaimer")
	_, ok = As[Exporter](b)
	add(ok, "Exporter")
	_, ok = As[NativeLifecycle](b)
	add(ok, "NativeLifecycle")
	_, ok = As[Locker](b)
	add(ok, "Locker")
	_, ok = As[Restorer](b)
	add(ok, "Restorer")
	_, ok = As[Watcher](b)
	add(ok, "Watcher")
	return caps
}

// RestoreOptions say which archive to bring back, and where.
type RestoreOptions struct {
	Location string
	Formats  []string
	// Manifest is what the engine recorded with the archive.
	Manifest []byte
	// To is where to restore; empty means where the runtime was.
	To string
	// Sink holds the archive's objects; Staging is a local folder for
	// temporary files.
	Sink    sink.Sink
	Staging string
}

// RestoreTarget is the one rule of `restore --to DIR` for a local runtime:
// each folder the archive holds comes back as DIR/<the folder's own name>
// (a worktree at DIR/<its folder>, a run folder at DIR/<id>, a container's
// home and workspaces each at DIR/<its name>). Without to, it goes back
// where it was.
func RestoreTarget(to, original string) string {
	if to == "" {
		return original
	}
	return filepath.Join(to, filepath.Base(original))
}

// ManualRestore is what a Restorer's error carries when the backend does
// not bring the runtime back itself (reclaimer creates no Modal sandbox):
// the command a person runs to start one from the archive.
type ManualRestore interface {
	error
	RestoreCommand() string
}

// Restorer brings an archived runtime back from its archive.
type Restorer interface {
	Restore(ctx context.Context, k Key, opts RestoreOptions) (path string, err error)
}

// Watcher reports, as they happen, runtimes whose state changed in a way a
// policy cares about (a container stopped or died), so a daemon can run a
// narrowed pass for them at once instead of waiting for its timer.
type Watcher interface {
	// Watch calls changed with the ID of each runtime that changed, until
	// ctx ends or the event source fails (it returns that error; the
	// caller retries with backoff and runs a full pass after reconnecting,
	// since events were missed meanwhile).
	Watch(ctx context.Context, changed func(id string)) error
}

// lifecycleJSON is Lifecycle with its delays written as Go duration
// strings ("15m0s"), never nanoseconds; "at once" for Immediately.
type lifecycleJSON struct {
	IdleSuspend  string    `json:"idle_suspend,omitempty"`
	IdlePause    string    `json:"idle_pause,omitempty"`
	Archive      string    `json:"archive,omitempty"`
	Delete       string    `json:"delete,omitempty"`
	Deadline     time.Time `json:"deadline,omitzero"`
	DeadlineStep Step      `json:"deadline_step,omitempty"`
	Can          []string  `json:"can,omitempty"`
}

// MarshalJSON writes the delays as duration strings.
func (l Lifecycle) MarshalJSON() ([]byte, error) {
	return json.Marshal(lifecycleJSON{IdleSuspend: delayText(l.IdleSuspend), IdlePause: delayText(l.IdlePause),
		Archive: delayText(l.Archive), Delete: delayText(l.Delete), Deadline: l.Deadline, DeadlineStep: l.DeadlineStep, Can: l.Can})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (l *Lifecycle) UnmarshalJSON(data []byte) error {
	var j lifecycleJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	parse := func(s string) time.Duration {
		switch s {
		case "":
			return 0
		case atOnce:
			return Immediately
		}
		d, e := time.ParseDuration(s)
		err = cmp.Or(err, e)
		return d
	}
	*l = Lifecycle{IdleSuspend: parse(j.IdleSuspend), IdlePause: parse(j.IdlePause), Archive: parse(j.Archive),
		Delete: parse(j.Delete), Deadline: j.Deadline, DeadlineStep: j.DeadlineStep, Can: j.Can}
	return err
}

const atOnce = "at once"

func delayText(d time.Duration) string {
	switch d {
	case 0:
		return ""
	case Immediately:
		return atOnce
	}
	return d.String()
}

// EmptyListing is what List may return, with no runtimes, to say why it
// found none ("selector a=b matched 0 of 14 containers"). It is not a
// failure (a source may well have no runtimes yet): the engine reports it
// only when the ledger knows runtimes of the source that it last saw
// present, the sign that reclaimer went blind rather than that they went.
type EmptyListing string

func (e EmptyListing) Error() string { return string(e) }

// ExportAbandoner undoes what an export interrupted by a crash left in the
// runtime itself (a worktree's snapshot refs in the user's repository). The
// engine calls it at start for an interrupted export no archive was
// recorded for; createdAt is the export's time (its plan's).
type ExportAbandoner interface {
	AbandonExport(ctx context.Context, rt Runtime, createdAt time.Time) error
}

// Discloser tells, before anything is archived, what an archive of rt
// would not keep (a home's caches, a container's writable layer): plans
// and `delete` show it before they act, not only the archive after.
// Cheap: no walk, no provider call.
type Discloser interface {
	NotKept(rt Runtime, opts ExportOptions) []string
}

// IdleLosesFiles is a backend that cannot suspend a runtime and whose
// provider, left to itself, idles a runtime by discarding its files
// (Cloudflare: a sleeping sandbox loses its whole disk). For such a
// backend idle reclaiming is an archive (verified by reading it back) and
// then a delete, with notice, instead of a suspend. The method says why,
// for plans.
type IdleLosesFiles interface {
	IdleLosesFiles() string
}

// Rooted is a backend whose runtimes live in local folders below managed
// roots: a runtime's folders, however they are reported (a host
// registering it through the API, say), must lie strictly inside one.
type Rooted interface {
	ManagedRoots() []string
}

// ReservedIDs are names no runtime may have: they are not folders a
// runtime can own, or they are the program's own (the trash).
var ReservedIDs = []string{".", "..", ".reclaimer-trash"}

// CheckReported refuses, with ErrProtected, a runtime id or folders that
// a caller reports for b and that b would never list: a reserved id, and,
// for a Rooted backend, a home or workspace that is not an absolute path
// strictly inside one of its managed roots. Backends without local folders
// accept any folder (it names a place inside a remote sandbox).
func CheckReported(b Backend, id string, folders []string) error {
	for _, r := range ReservedIDs {
		if id == r {
			return fmt.Errorf("runtime id %q is reserved: %w", id, ErrProtected)
		}
	}
	rooted, ok := As[Rooted](b)
	if !ok {
		return nil
	}
	roots := rooted.ManagedRoots()
	for _, f := range folders {
		if f == "" {
			continue
		}
		inside := false
		for _, r := range roots {
			if rel, err := filepath.Rel(r, f); err == nil && filepath.IsAbs(f) && filepath.Clean(f) == f &&
				rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
				inside = true
				break
			}
		}
		if !inside {
			return fmt.Errorf("folder %q is not inside a managed root of %s (%s): %w", f, b.Name(), strings.Join(roots, ", "), ErrProtected)
		}
	}
	return nil
}
