package sources

import (
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Defaults of [[openhands_cloud]].
const (
	DefaultOpenHandsCloudEndpoint = "https://app.all-hands.dev"
	DefaultOpenHandsCloudKeyEnv   = "OPENHANDS_API_KEY"
)

// OpenHandsCloud is [[openhands_cloud]]: the sandboxes of an OpenHands
// Cloud (or self-hosted OpenHands) app server, through its V1 API.
var OpenHandsCloud = define("openhands_cloud", openhandscloud.Name,
	"every sandbox of an OpenHands Cloud (or self-hosted OpenHands) app server the key's user owns, narrowed by `user_id` and `conversation_tags`",
	func(env *Env, t *OpenHandsCloudTable) (backend.Backend, error) {
		c, err := remoteClient(t.URL(), t.KeyEnv(), t.APIKeyFile, t.Rate,
			func(k remote.Secret) remote.Auth { return remote.HeaderAuth("X-Access-Token", k) })
		if err != nil {
			return nil, err
		}
		return &openhandscloud.Backend{Client: c, UserID: t.UserID, ConversationTags: t.ConversationTags,
			DeleteConversations: t.DeleteConversations, ServerIdlePause: serverTimer(t.ServerIdlePause),
			ServerDelete: serverTimer(t.ServerDelete)}, nil
	})

// OpenHandsCloudTable is one [[openhands_cloud]] table.
type OpenHandsCloudTable struct {
	// Endpoint (endpoint) is the app server. Default
	// "https://app.all-hands.dev".
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env) names the variable holding the API key, sent
	// as X-Access-Token. Default "OPENHANDS_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) replaces api_key_env.
	APIKeyFile string `toml:"api_key_file"`
	// UserID (user_id), when set, keeps only the sandboxes, and the
	// conversations on them, this user created.
	UserID string `toml:"user_id"`
	// ConversationTags (conversation_tags), when set, keeps only sandboxes
	// whose every conversation carries all these tags.
	ConversationTags map[string]string `toml:"conversation_tags"`
	// DeleteConversations (delete_conversations) removes a sandbox by
	// deleting its conversations (the gentle path) instead of the sandbox.
	DeleteConversations bool `toml:"delete_conversations"`
	// ServerIdlePause, ServerDelete (server_idle_pause, server_delete) are
	// what the server is configured with (RUNTIME_IDLE_SECONDS,
	// RUNTIME_DEAD_SECONDS); default OpenHands' 20m and 60d, "off" when
	// the server runs without them. Reported by native plan, never
	// changed.
	ServerIdlePause *config.Duration `toml:"server_idle_pause"`
	ServerDelete    *config.Duration `toml:"server_delete"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// serverTimer maps a server_* key to the backend's: unset is 0 (the
// default), "off" negative.
func serverTimer(d *config.Duration) time.Duration {
	switch {
	case d == nil:
		return 0
	case *d == 0:
		return -1
	}
	return time.Duration(*d)
}

// URL returns endpoint or its default.
func (t *OpenHandsCloudTable) URL() string {
	return orDefault(t.Endpoint, DefaultOpenHandsCloudEndpoint)
}

// KeyEnv returns api_key_env or its default.
func (t *OpenHandsCloudTable) KeyEnv() string {
	return keyEnv(t.APIKeyEnv, t.APIKeyFile, DefaultOpenHandsCloudKeyEnv)
}

// Identity implements config.Table: the endpoint and the scope.
func (t *OpenHandsCloudTable) Identity() string {
	id := t.URL()
	if t.UserID != "" {
		id += " user=" + t.UserID
	}
	if len(t.ConversationTags) > 0 {
		id += " " + config.Pairs(t.ConversationTags)
	}
	return id
}

// Describe implements config.Table.
func (t *OpenHandsCloudTable) Describe() string {
	s := "endpoint = \"" + t.URL() + "\""
	if t.UserID != "" {
		s += ", user_id = \"" + t.UserID + "\""
	}
	if len(t.ConversationTags) > 0 {
		s += ", conversation_tags = " + config.Quoted(t.ConversationTags)
	}
	return s
}

// Paths implements config.Table.
func (t *OpenHandsCloudTable) Paths() []config.Path {
	return []config.Path{credentialPath("api_key_file", &t.APIKeyFile)}
}

// Check implements config.Table. The key's own user is the scope the
// server enforces; user_id and conversation_tags narrow it further.
func (t *OpenHandsCloudTable) Check(c *config.Check) {
	c.Remote(t.Endpoint, "api_key_env", t.APIKeyEnv, "api_key_file", t.APIKeyFile, t.Rate)
	c.Selector("conversation_tags", t.ConversationTags, false, "")
}
