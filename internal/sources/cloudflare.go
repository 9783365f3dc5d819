package sources

import (
	"context"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Defaults of [[cloudflare]].
const (
	DefaultCloudflareKeyEnv      = "SANDBOX_API_KEY"
	DefaultCloudflareTokenEnv    = "CLOUDFLARE_API_TOKEN"
	DefaultCloudflareAPIEndpoint = "https://api.cloudflare.com/client/v4"
)

// Cloudflare is [[cloudflare]]: the Cloudflare sandboxes hosts registered,
// through the bridge Worker.
var Cloudflare = define("cloudflare", cloudflare.Name,
	"every Cloudflare sandbox a host registered for the source (`POST /v1/runtimes`), through the bridge Worker at `endpoint`; states from the account's Containers API where `account_id` is set",
	func(env *Env, t *CloudflareTable) (backend.Backend, error) {
		c, err := remoteClient(t.Endpoint, t.KeyEnv(), t.APIKeyFile, t.Rate, remote.BearerAuth)
		if err != nil {
			return nil, err
		}
		key, _ := remote.LoadSecret(t.KeyEnv(), t.APIKeyFile) // its error is c's
		b := &cloudflare.Backend{Bridge: c, Key: key, Excludes: t.Excludes}
		name := env.sourceName(t)
		b.Names = func(ctx context.Context) ([]string, error) {
			if env.Registered == nil {
				return nil, fmt.Errorf("no ledger to read the registrations of %s from", name)
			}
			return env.Registered(ctx, name, cloudflare.Name)
		}
		if t.AccountID != "" {
			api, err := remoteClient(t.APIURL(), orDefault(t.APITokenEnv, DefaultCloudflareTokenEnv), "", t.Rate, remote.BearerAuth)
			if err != nil {
				return nil, err
			}
			b.Containers = &cloudflare.Containers{Client: api, AccountID: t.AccountID, Application: t.Application}
		}
		return b, nil
	})

// CloudflareTable is one [[cloudflare]] table.
type CloudflareTable struct {
	// Endpoint (endpoint, required) is the bridge Worker's URL.
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env) names the variable holding the bridge's
	// bearer key. Default "SANDBOX_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) replaces api_key_env.
	APIKeyFile string `toml:"api_key_file"`
	// AccountID (account_id), when set, reads the sandboxes' states from
	// the account's Containers API; without it every state is unknown
	// and nothing is touched.
	AccountID string `toml:"account_id"`
	// APITokenEnv (api_token_env) names the variable holding the
	// Cloudflare API token. Default "CLOUDFLARE_API_TOKEN".
	APITokenEnv string `toml:"api_token_env"`
	// APIEndpoint (api_endpoint) is Cloudflare's API. Default
	// "https://api.cloudflare.com/client/v4".
	APIEndpoint string `toml:"api_endpoint"`
	// Application (application) is the Sandbox's containers application;
	// default every application of the account.
	Application string `toml:"application"`
	// Excludes (excludes) are left out of an archive's persist unless
	// archives include dependencies. Default the dependency folders.
	Excludes []string `toml:"excludes"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// KeyEnv returns api_key_env or its default.
func (t *CloudflareTable) KeyEnv() string {
	return keyEnv(t.APIKeyEnv, t.APIKeyFile, DefaultCloudflareKeyEnv)
}

// APIURL returns api_endpoint or Cloudflare's API.
func (t *CloudflareTable) APIURL() string {
	return orDefault(t.APIEndpoint, DefaultCloudflareAPIEndpoint)
}

// Identity implements config.Table: the bridge.
func (t *CloudflareTable) Identity() string { return t.Endpoint }

// Describe implements config.Table.
func (t *CloudflareTable) Describe() string { return fmt.Sprintf("endpoint = %q", t.Endpoint) }

// Paths implements config.Table.
func (t *CloudflareTable) Paths() []config.Path {
	return []config.Path{credentialPath("api_key_file", &t.APIKeyFile)}
}

// Check implements config.Table.
func (t *CloudflareTable) Check(c *config.Check) {
	if t.Endpoint == "" {
		c.Add("", "endpoint (the bridge Worker's URL) is required")
	}
	c.Remote(t.Endpoint, "api_key_env", t.APIKeyEnv, "api_key_file", t.APIKeyFile, t.Rate)
	c.Remote("", "api_token_env", t.APITokenEnv, "", "", nil)
	if t.APIEndpoint != "" {
		c.Endpoint("api_endpoint", t.APIEndpoint)
	}
	if t.AccountID == "" && (t.APITokenEnv != "" || t.Application != "") {
		c.Add("account_id", "is required with api_token_env or application")
	}
	for i, e := range t.Excludes {
		if e == "" {
			c.Add(fmt.Sprintf("excludes[%d]", i), "an empty name")
		}
	}
}
