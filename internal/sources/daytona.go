package sources

import (
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Defaults of [[daytona]].
const (
	DefaultDaytonaEndpoint = "https://app.daytona.io/api"
	DefaultDaytonaKeyEnv   = "DAYTONA_API_KEY"
)

// Daytona is [[daytona]]: the Daytona sandboxes whose labels match.
var Daytona = define("daytona", daytona.Name,
	"every Daytona sandbox carrying all of `labels`",
	func(env *Env, t *DaytonaTable) (backend.Backend, error) {
		c, err := remoteClient(t.URL(), t.KeyEnv(), t.APIKeyFile, t.Rate, remote.BearerAuth)
		if err != nil {
			return nil, err
		}
		return &daytona.Backend{Client: c, Labels: t.Labels}, nil
	})

// DaytonaTable is one [[daytona]] table.
type DaytonaTable struct {
	// Endpoint (endpoint): default "https://app.daytona.io/api".
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env): default "DAYTONA_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) replaces api_key_env.
	APIKeyFile string `toml:"api_key_file"`
	// Labels (labels, required) select the sandboxes reclaimer manages.
	Labels map[string]string `toml:"labels"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// URL returns endpoint or its default.
func (t *DaytonaTable) URL() string { return orDefault(t.Endpoint, DefaultDaytonaEndpoint) }

// KeyEnv returns api_key_env or its default.
func (t *DaytonaTable) KeyEnv() string {
	return keyEnv(t.APIKeyEnv, t.APIKeyFile, DefaultDaytonaKeyEnv)
}

// Identity implements config.Table: the endpoint and the selector.
func (t *DaytonaTable) Identity() string { return t.URL() + " " + config.Pairs(t.Labels) }

// Describe implements config.Table.
func (t *DaytonaTable) Describe() string { return describeRemote(t.Endpoint, "labels", t.Labels) }

// Paths implements config.Table.
func (t *DaytonaTable) Paths() []config.Path {
	return []config.Path{credentialPath("api_key_file", &t.APIKeyFile)}
}

// Check implements config.Table.
func (t *DaytonaTable) Check(c *config.Check) {
	c.Remote(t.Endpoint, "api_key_env", t.APIKeyEnv, "api_key_file", t.APIKeyFile, t.Rate)
	c.Selector("labels", t.Labels, true, "a label selector")
}
