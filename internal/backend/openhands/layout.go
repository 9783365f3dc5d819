package openhands

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/beneath"
)

// The names OpenHands' agent-server gives what it stores and labels.
const (
	// OwnerLabel marks the conversation containers of one agent-server;
	// its value is Layout.Owner.
	OwnerLabel = "ai.openhands.runtime-owner"
	// ExecutionScopeLabel marks execution-only containers (tools run in a
	// container, the conversation in the server); its value is
	// Layout.ExecutionScope.
	ExecutionScopeLabel = "ai.openhands.execution-scope"
	// ExecutionNamePrefix starts the name of every execution-only
	// container.
	ExecutionNamePrefix = "openhands-execution-"

	controlDir  = "runtime-control"
	dataDir     = "runtime-data"
	homeDir     = "persistence"
	workDir     = "workspace"
	stateFile   = "base_state.json"
	ownTrash    = ".trash"
	markerExt   = ".archived.json"
	manifestExt = ".json"
	// maxControlFile bounds what is read of a manifest or marker: they
	// hold a few keys.
	maxControlFile = 1 << 20
)

// Layout is where one agent-server keeps its runtimes, derived as its
// storage module derives it from its two settings: the persistence folder
// (OH_PERSISTENCE_DIR; by default ".openhands" beside the conversations
// folder) and the conversations folder (conversations_path).
type Layout struct {
	// PersistenceDir and ConversationsDir are absolute, clean and resolved
	// (the agent-server hashes resolved paths into its labels).
	PersistenceDir   string
	ConversationsDir string
}

// NewLayout checks the two folders: absolute paths; conversations may be
// empty, meaning "conversations" beside a persistence folder named
// ".openhands" (the agent-server's own default pairing).
func NewLayout(persistence, conversations string) (Layout, error) {
	if !filepath.IsAbs(persistence) {
		return Layout{}, fmt.Errorf("persistence_dir %q: not an absolute path", persistence)
	}
	persistence = filepath.Clean(persistence)
	if conversations == "" {
		if filepath.Base(persistence) != ".openhands" {
			return Layout{}, fmt.Errorf("persistence_dir %q is not named .openhands: set conversations_dir too", persistence)
		}
		conversations = filepath.Join(filepath.Dir(persistence), "conversations")
	}
	if !filepath.IsAbs(conversations) {
		return Layout{}, fmt.Errorf("conversations_dir %q: not an absolute path", conversations)
	}
	return Layout{PersistenceDir: persistence, ConversationsDir: filepath.Clean(conversations)}, nil
}

// ControlDir holds the identity manifests and archive markers.
func (l Layout) ControlDir() string { return filepath.Join(l.PersistenceDir, controlDir) }

// DataRoot holds one runtime folder per conversation: the managed root.
func (l Layout) DataRoot() string { return filepath.Join(l.PersistenceDir, dataDir) }

// RunDir is the runtime folder of conversation id (32 hex digits).
func (l Layout) RunDir(id string) string { return filepath.Join(l.DataRoot(), id) }

// Home is the sandbox's $HOME, mounted at /var/openhands/.openhands.
func (l Layout) Home(id string) string { return filepath.Join(l.RunDir(id), homeDir) }

// Workspace is the workspace the agent-server creates, mounted at
// /workspace (a manifest may name another, see Manifest.WorkspacePath).
func (l Layout) Workspace(id string) string { return filepath.Join(l.RunDir(id), workDir) }

// ManifestPath is the conversation's identity manifest: its keys; never
// modified.
func (l Layout) ManifestPath(id string) string {
	return filepath.Join(l.ControlDir(), id+manifestExt)
}

// MarkerPath is the archive marker: while it exists the agent-server
// shows the conversation as archived and refuses to start its runtime
// (HTTP 410).
func (l Layout) MarkerPath(id string) string { return filepath.Join(l.ControlDir(), id+markerExt) }

// ConversationDir holds the conversation's history (meta.json,
// base_state.json, events/).
func (l Layout) ConversationDir(id string) string { return filepath.Join(l.ConversationsDir, id) }

// StatePath is the file whose modification time is the conversation's
// last activity.
func (l Layout) StatePath(id string) string { return filepath.Join(l.ConversationDir(id), stateFile) }

// TrashDir is where the agent-server's own reclaimer sets runtimes aside.
func (l Layout) TrashDir() string { return filepath.Join(l.DataRoot(), ownTrash) }

// Owner is the value of OwnerLabel on this agent-server's conversation
// containers: the first 24 hex digits of sha256(conversations + NUL +
// persistence).
func (l Layout) Owner() string {
	sum := sha256.Sum256([]byte(l.ConversationsDir + "\x00" + l.PersistenceDir))
	return hex.EncodeToString(sum[:])[:24]
}

// ExecutionScope is the value of ExecutionScopeLabel on this
// agent-server's execution-only containers: the first 24 hex digits of
// sha256(conversations).
func (l Layout) ExecutionScope() string {
	sum := sha256.Sum256([]byte(l.ConversationsDir))
	return hex.EncodeToString(sum[:])[:24]
}

var conversationID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// IsConversationID tells whether s is a conversation id as the
// agent-server names its folders: a UUID's 32 lowercase hex digits.
func IsConversationID(s string) bool { return conversationID.MatchString(s) }

// UUID writes a conversation id the way the agent-server's API does.
func UUID(id string) string {
	if !IsConversationID(id) {
		return id
	}
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}

// Manifest is what reclaimer reads of an identity manifest (the rest, the
// encrypted keys, is never looked at).
type Manifest struct {
	ConversationID string `json:"conversation_id"`
	// WorkspacePath is the workspace the conversation's container mounts:
	// the agent-server's own (inside the runtime folder) or a folder the
	// caller supplied (never touched). Empty in manifests that predate it.
	WorkspacePath string `json:"workspace_path,omitempty"`
}

// Marker is the content of an archive marker; the agent-server only asks
// whether the file exists.
type Marker struct {
	RetiredAt string `json:"retired_at"`
}

// readControl reads a small regular file without following a link or
// blocking on a FIFO (beneath.ReadFileAt).
func readControl(path string) ([]byte, error) { return beneath.ReadFileAt(path, maxControlFile) }

// ReadManifest reads conversation id's manifest; it fails when the file
// is not a small regular file, not JSON, or names another conversation
// (the agent-server itself refuses such a manifest).
func (l Layout) ReadManifest(id string) (Manifest, error) {
	data, err := readControl(l.ManifestPath(id))
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", id, err)
	}
	if strings.ReplaceAll(strings.ToLower(m.ConversationID), "-", "") != id {
		return Manifest{}, fmt.Errorf("read manifest of %s: it names conversation %q", id, m.ConversationID)
	}
	return m, nil
}

// ownedWorkspace is the manifest's workspace when it lies inside the
// runtime folder (the agent-server created it), else "" (a caller's
// checkout: listed, never touched). With no workspace_path the
// agent-server's default is the runtime folder's "workspace".
func (l Layout) ownedWorkspace(id string, m Manifest) (ws string, foreign string) {
	if m.WorkspacePath == "" {
		return l.Workspace(id), ""
	}
	p := filepath.Clean(m.WorkspacePath)
	rel, err := filepath.Rel(l.RunDir(id), p)
	if !filepath.IsAbs(p) || err != nil || !filepath.IsLocal(rel) || rel == "." {
		return "", p
	}
	return p, ""
}

// pythonTime formats t as Python's datetime.now(UTC).isoformat() does:
// microseconds (left out when zero) and "+00:00".
func pythonTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}

// MarkerContent is what the agent-server's own retention writes into a
// marker, byte for byte: json.dumps({"retired_at": <isoformat>}).
func MarkerContent(at time.Time) []byte {
	return []byte(`{"retired_at": "` + pythonTime(at) + `"}`)
}

// writeMarker writes conversation id's archive marker unless one exists
// (created reports whether this call made it). The file is written whole
// under a temporary name and linked into place without replacing
// anything, owned like the control folder (the agent-server's user) when
// running as root.
func (l Layout) writeMarker(id string, at time.Time) (created bool, err error) {
	dir := l.ControlDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("write archive marker of %s: open %s: %w", id, dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return false, fmt.Errorf("write archive marker of %s: %w", id, err)
	}
	name := id + markerExt
	if err := unix.Fstatat(dfd, name, new(unix.Stat_t), unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return false, nil // there already: archived by the agent-server, or by an earlier pass
	}
	tmp := fmt.Sprintf(".%s.reclaimer-%d", name, os.Getpid())
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, fmt.Errorf("write archive marker of %s: %w", id, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, err = f.Write(MarkerContent(at))
	if err == nil && os.Geteuid() == 0 {
		err = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE)
		if err == unix.EEXIST {
			unix.Unlinkat(dfd, tmp, 0)
			return false, nil
		}
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return false, fmt.Errorf("write archive marker of %s: %w", id, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return true, fmt.Errorf("write archive marker of %s: %w", id, err)
	}
	return true, nil
}

// removeMarker removes conversation id's archive marker (a regular file;
// a link or anything else there is refused). Absent is fine.
func (l Layout) removeMarker(id string) error {
	dir := l.ControlDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove archive marker of %s: open %s: %w", id, dir, err)
	}
	defer unix.Close(dfd)
	name := id + markerExt
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		return nil
	case err != nil:
		return fmt.Errorf("remove archive marker of %s: %w", id, err)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("remove archive marker of %s: %w", id, beneath.ErrNotRegular)
	}
	if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("remove archive marker of %s: %w", id, err)
	}
	return unix.Fsync(dfd)
}
