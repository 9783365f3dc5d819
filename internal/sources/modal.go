package sources

import (
	"os"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/config"
)

// Modal is [[modal]]: the Modal sandboxes carrying every tag of `tags`,
// through Modal's gRPC API.
var Modal = define("modal", modal.Name,
	"every Modal sandbox carrying all of `tags` (gRPC API; no pause: idle suspend is not offered)",
	func(env *Env, t *ModalTable) (backend.Backend, error) {
		id, secret, credErr := modal.LoadTokens(t.TokenIDEnv, t.TokenSecretEnv)
		r := 0.0
		if t.Rate != nil {
			r = *t.Rate
		}
		c, err := modal.Dial(modal.ClientOptions{Endpoint: t.URL(), TokenID: id, TokenSecret: secret, CredentialErr: credErr, Rate: r})
		if err != nil {
			return nil, err
		}
		return &modal.Backend{Client: c, Tags: t.Tags, AppID: t.AppID, Environment: t.Env(),
			SnapshotTimeout: dur(t.SnapshotTimeout), RestoreApp: t.RestoreApp}, nil
	})

// ModalTable is one [[modal]] table.
type ModalTable struct {
	// Endpoint (endpoint) is Modal's API. Default $MODAL_SERVER_URL, else
	// "https://api.modal.com"; plain http only to loopback.
	Endpoint string `toml:"endpoint"`
	// TokenIDEnv, TokenSecretEnv (token_id_env, token_secret_env) name the
	// variables holding the token. Default "MODAL_TOKEN_ID" and
	// "MODAL_TOKEN_SECRET". Never logged.
	TokenIDEnv     string `toml:"token_id_env"`
	TokenSecretEnv string `toml:"token_secret_env"`
	// Tags (tags, required) select the sandboxes: every tag must match.
	Tags map[string]string `toml:"tags"`
	// AppID (app_id) narrows the listing to one app.
	AppID string `toml:"app_id"`
	// Environment (environment) is Modal's environment. Default
	// $MODAL_ENVIRONMENT.
	Environment string `toml:"environment"`
	// SnapshotTimeout (snapshot_timeout) bounds the filesystem snapshot of
	// an archive. Default "10m".
	SnapshotTimeout *config.Duration `toml:"snapshot_timeout"`
	// RestoreApp (restore_app) is the app the printed restore command
	// starts a sandbox in. Default "reclaimer-restore".
	RestoreApp string `toml:"restore_app"`
	// Rate (rate): calls a second. Default 10.
	Rate *float64 `toml:"rate"`

	config.SourceBase
}

// URL returns endpoint, else $MODAL_SERVER_URL, else Modal's API.
func (t *ModalTable) URL() string {
	return orDefault(orDefault(t.Endpoint, os.Getenv("MODAL_SERVER_URL")), modal.DefaultEndpoint)
}

// Env returns environment or $MODAL_ENVIRONMENT.
func (t *ModalTable) Env() string { return orDefault(t.Environment, os.Getenv("MODAL_ENVIRONMENT")) }

// Identity implements config.Table: the endpoint as written and the
// selector.
func (t *ModalTable) Identity() string {
	return orDefault(t.Endpoint, modal.DefaultEndpoint) + " " + config.Pairs(t.Tags)
}

// Describe implements config.Table.
func (t *ModalTable) Describe() string { return describeRemote(t.Endpoint, "tags", t.Tags) }

// Paths implements config.Table.
func (t *ModalTable) Paths() []config.Path { return nil }

// Check implements config.Table.
func (t *ModalTable) Check(c *config.Check) {
	c.Remote(t.Endpoint, "token_id_env", t.TokenIDEnv, "", "", t.Rate)
	c.Remote("", "token_secret_env", t.TokenSecretEnv, "", "", nil)
	c.Selector("tags", t.Tags, true, "a tag selector")
}
