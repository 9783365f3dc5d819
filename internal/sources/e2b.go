package sources

import (
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Defaults of [[e2b]].
const (
	DefaultE2BEndpoint = "https://api.e2b.app"
	DefaultE2BKeyEnv   = "E2B_API_KEY"
)

// E2B is [[e2b]]: the E2B sandboxes whose metadata match.
var E2B = define("e2b", e2b.Name,
	"every E2B sandbox whose metadata hold all of `metadata`",
	func(env *Env, t *E2BTable) (backend.Backend, error) {
		c, err := remoteClient(t.URL(), t.KeyEnv(), t.APIKeyFile, t.Rate,
			func(k remote.Secret) remote.Auth { return remote.HeaderAuth("X-API-Key", k) })
		if err != nil {
			return nil, err
		}
		return &e2b.Backend{Client: c, Metadata: t.Metadata}, nil
	})

// E2BTable is one [[e2b]] table.
type E2BTable struct {
	// Endpoint (endpoint) is the API's base URL. Default
	// "https://api.e2b.app". https, or http to a loopback address.
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env) names the environment variable holding the
	// API key. Default "E2B_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) is a file whose first line is the API key;
	// it replaces api_key_env. Absolute, "~/" expands.
	APIKeyFile string `toml:"api_key_file"`
	// Metadata (metadata, required) selects the sandboxes reclaimer
	// manages: every key must match. No other sandbox is ever touched.
	Metadata map[string]string `toml:"metadata"`
	// Rate (rate) is the requests a second sent to this source. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// URL returns endpoint or its default.
func (t *E2BTable) URL() string { return orDefault(t.Endpoint, DefaultE2BEndpoint) }

// KeyEnv returns api_key_env or its default (none when a file is set).
func (t *E2BTable) KeyEnv() string { return keyEnv(t.APIKeyEnv, t.APIKeyFile, DefaultE2BKeyEnv) }

// Identity implements config.Table: the endpoint and the selector.
func (t *E2BTable) Identity() string { return t.URL() + " " + config.Pairs(t.Metadata) }

// Describe implements config.Table.
func (t *E2BTable) Describe() string { return describeRemote(t.Endpoint, "metadata", t.Metadata) }

// Paths implements config.Table.
func (t *E2BTable) Paths() []config.Path {
	return []config.Path{credentialPath("api_key_file", &t.APIKeyFile)}
}

// Check implements config.Table.
func (t *E2BTable) Check(c *config.Check) {
	c.Remote(t.Endpoint, "api_key_env", t.APIKeyEnv, "api_key_file", t.APIKeyFile, t.Rate)
	c.Selector("metadata", t.Metadata, true, "a metadata selector")
}
