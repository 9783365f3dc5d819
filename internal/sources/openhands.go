package sources

import (
	"fmt"
	"path/filepath"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

// OpenHands is [[openhands]]: the runtimes of one OpenHands agent-server,
// derived from its persistence and conversations folders as its own
// storage module derives them.
var OpenHands = define("openhands", openhands.Name,
	"every conversation of one OpenHands agent-server (`persistence_dir`, `conversations_dir`): its runtime folder (home and workspace), its containers, the archive marker the agent-server honours",
	func(env *Env, t *OpenHandsTable) (backend.Backend, error) {
		l, err := t.Layout()
		if err != nil {
			return nil, err
		}
		var c *dockerclient.Client
		if t.UsesDocker() {
			if c, err = env.dockerClient(t.Host); err != nil {
				return nil, err
			}
		}
		return openhands.New(openhands.Options{Layout: l, Client: c, Git: env.Git,
			CacheDirs: env.Config.PolicyFor(t).CacheDirs, ProbeDir: filepath.Join(env.StateDir, "cache")}), nil
	}).local()

// OpenHandsTable is one [[openhands]] table: one agent-server's storage.
type OpenHandsTable struct {
	// PersistenceDir (persistence_dir, required) is the agent-server's
	// persistence folder (its OH_PERSISTENCE_DIR), holding runtime-control
	// and runtime-data. Absolute, "~/" expands; resolved at load (the
	// agent-server hashes resolved paths into its container labels).
	PersistenceDir string `toml:"persistence_dir"`
	// ConversationsDir (conversations_dir) is its conversations folder
	// (conversations_path): read for activity, never changed. Default
	// "conversations" beside a persistence_dir named ".openhands" (the
	// agent-server's own pairing); required otherwise.
	ConversationsDir string `toml:"conversations_dir"`
	// Docker (docker) says whether the agent-server runs its conversations
	// in Docker containers (Docker mode). Default true; false for an
	// agent-server in local mode: no container is looked at, and the
	// process scan is the only busy check.
	Docker *bool `toml:"docker"`
	// Host (host) is the Engine's address, e.g. "unix:///run/docker.sock".
	// Default: $DOCKER_HOST, else the platform's default socket.
	Host string `toml:"host"`

	config.SourceBase
}

// UsesDocker tells whether the agent-server's containers are looked at.
func (t *OpenHandsTable) UsesDocker() bool { return t.Docker == nil || *t.Docker }

// Layout is the agent-server's layout the table names.
func (t *OpenHandsTable) Layout() (openhands.Layout, error) {
	return openhands.NewLayout(t.PersistenceDir, t.ConversationsDir)
}

// Identity implements config.Table: the persistence folder.
func (t *OpenHandsTable) Identity() string { return t.PersistenceDir }

// Describe implements config.Table.
func (t *OpenHandsTable) Describe() string {
	return fmt.Sprintf("persistence_dir = %q", t.PersistenceDir)
}

// Paths implements config.Table: the persistence folder is managed (its
// runtime-data is where folders are removed, its runtime-control where
// markers are written); the conversations folder is only read.
func (t *OpenHandsTable) Paths() []config.Path {
	return []config.Path{
		{Key: "persistence_dir", Value: &t.PersistenceDir, Role: config.PathDirs},
		{Key: "conversations_dir", Value: &t.ConversationsDir, Role: config.PathRead},
	}
}

// Check implements config.Table.
func (t *OpenHandsTable) Check(c *config.Check) {
	if t.PersistenceDir == "" {
		c.Add("", "persistence_dir is required: the agent-server's persistence folder (OH_PERSISTENCE_DIR)")
		return
	}
	if !filepath.IsAbs(t.PersistenceDir) {
		return // reported with the paths
	}
	if t.ConversationsDir == "" && filepath.Base(filepath.Clean(t.PersistenceDir)) != ".openhands" {
		c.Add("conversations_dir", "required: persistence_dir %q is not named .openhands, so the agent-server's default conversations folder beside it does not apply", t.PersistenceDir)
	}
	if t.Host != "" && !t.UsesDocker() {
		c.Add("host", "set with docker = false: no Engine is asked")
	}
}
