package cli

import (
	"context"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// remoteSources builds the [[e2b]], [[daytona]] and [[http]] sources. A
// credential that cannot be read does not stop the command: that source's
// calls fail with the reason, reported like an outage, and the others run.
func remoteSources(cfg *config.Config) ([]engine.Source, error) {
	var out []engine.Source
	client := func(endpoint, env, file string, rate *float64, auth func(remote.Secret) remote.Auth) (*remote.Client, error) {
		secret, err := remote.LoadSecret(env, file)
		return remote.New(remote.Options{Endpoint: endpoint, Rate: config.RateOf(rate), Secret: secret,
			Auth: auth(secret), CredentialErr: err})
	}
	for i, s := range cfg.E2B {
		name := fmt.Sprintf("e2b[%d]", i)
		c, err := client(s.URL(), s.KeyEnv(), s.APIKeyFile, s.Rate, func(k remote.Secret) remote.Auth { return remote.HeaderAuth("X-API-Key", k) })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, engine.Source{Name: name, Backend: &e2b.Backend{Client: c, Metadata: s.Metadata}, Settings: settings(cfg.PolicyFor(s))})
	}
	for i, s := range cfg.Daytona {
		name := fmt.Sprintf("daytona[%d]", i)
		c, err := client(s.URL(), s.KeyEnv(), s.APIKeyFile, s.Rate, remote.BearerAuth)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, engine.Source{Name: name, Backend: &daytona.Backend{Client: c, Labels: s.Labels}, Settings: settings(cfg.PolicyFor(s))})
	}
	for i, s := range cfg.HTTP {
		name := fmt.Sprintf("http[%d]", i)
		c, err := client(s.Endpoint, s.TokenEnv, s.TokenFile, s.Rate, remote.BearerAuth)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// The server's capabilities decide the roles; a server that cannot
		// be reached now gets every role, each checking again when used.
		b, _ := httpbackend.Open(context.Background(), &httpbackend.Backend{Client: c, Labels: s.Labels})
		out = append(out, engine.Source{Name: name, Backend: b, Settings: settings(cfg.PolicyFor(s))})
	}
	return out, nil
}
