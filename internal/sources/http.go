package sources

import (
	"context"
	"fmt"
	"strings"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// HTTP is [[http]]: a server of the http backend protocol
// (api/http-backend.yaml).
var HTTP = define("http", httpbackend.Name,
	"every runtime a server of the http backend protocol (`api/http-backend.yaml`) at `endpoint` lists, optionally narrowed by `labels`",
	func(env *Env, t *HTTPTable) (backend.Backend, error) {
		c, err := remoteClient(t.Endpoint, t.TokenEnv, t.TokenFile, t.Rate, remote.BearerAuth)
		if err != nil {
			return nil, err
		}
		// The server's capabilities decide the roles; a server that cannot
		// be reached now gets every role, each checking again when used.
		b, _ := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: c, Labels: t.Labels})
		return b, nil
	})

// HTTPTable is one [[http]] table.
type HTTPTable struct {
	// Endpoint (endpoint, required): the protocol's base URL.
	Endpoint string `toml:"endpoint"`
	// TokenEnv (token_env) names the variable holding the bearer token.
	TokenEnv string `toml:"token_env"`
	// TokenFile (token_file) replaces token_env.
	TokenFile string `toml:"token_file"`
	// Labels (labels) select the runtimes reclaimer manages. Optional: the
	// server is reclaimer's own extension point and serves only what it
	// means reclaimer to manage.
	Labels map[string]string `toml:"labels"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// Identity implements config.Table: the endpoint, and the selector if any.
func (t *HTTPTable) Identity() string {
	return strings.TrimSpace(t.Endpoint + " " + config.Pairs(t.Labels))
}

// Describe implements config.Table.
func (t *HTTPTable) Describe() string {
	if len(t.Labels) == 0 {
		return fmt.Sprintf("endpoint = %q", t.Endpoint)
	}
	return describeRemote(t.Endpoint, "labels", t.Labels)
}

// Paths implements config.Table.
func (t *HTTPTable) Paths() []config.Path {
	return []config.Path{credentialPath("token_file", &t.TokenFile)}
}

// Check implements config.Table.
func (t *HTTPTable) Check(c *config.Check) {
	if t.Endpoint == "" {
		c.Add("", "endpoint is required")
	}
	c.Remote(t.Endpoint, "token_env", t.TokenEnv, "token_file", t.TokenFile, t.Rate)
	if t.TokenEnv == "" && t.TokenFile == "" {
		c.Add("", "set token_env or token_file: the server must know it is reclaimer calling")
	}
	c.Selector("labels", t.Labels, false, "")
}

// describeRemote names a remote source as written: its endpoint when set,
// and its selector.
func describeRemote(endpoint, selKey string, sel map[string]string) string {
	s := selKey + " = " + config.Quoted(sel)
	if endpoint != "" {
		s = fmt.Sprintf("endpoint = %q, %s", endpoint, s)
	}
	return s
}
