package sources

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Build returns one engine source per source table, in file order by kind.
func Build(cfg *config.Config) ([]engine.Source, error) {
	git := gitcmd.Runner{Timeout: 60 * time.Second}
	var out []engine.Source
	for i, w := range cfg.Worktrees {
		out = append(out, engine.Source{
			Name:     fmt.Sprintf("worktrees[%d]", i),
			Backend:  &worktree.Backend{Repo: w.Repo, Root: w.Root, Git: git},
			Settings: Settings(cfg.PolicyFor(w)),
		})
	}
	for i, d := range cfg.Dirs {
		out = append(out, engine.Source{
			Name: fmt.Sprintf("dirs[%d]", i),
			Backend: &rundir.Backend{Root: d.Root, Home: d.Home, Workspaces: d.Workspaces, Git: git,
				CacheDirs: cfg.PolicyFor(d).CacheDirs, ProbeDir: filepath.Join(filepath.Dir(cfg.Ledger.Path), "cache")},
			Settings: Settings(cfg.PolicyFor(d)),
		})
	}
	// One client per Engine address: it makes no request until a listing.
	clients := map[string]*dockerclient.Client{}
	for i, d := range cfg.Docker {
		c, ok := clients[d.Host]
		if !ok {
			var err error
			if c, err = dockerclient.New(d.Host); err != nil {
				return nil, fmt.Errorf("docker[%d]: %w", i, err)
			}
			clients[d.Host] = c
		}
		out = append(out, engine.Source{
			Name: fmt.Sprintf("docker[%d]", i),
			Backend: &docker.Backend{Client: c, Labels: d.Selector(), Home: d.Home, Workspaces: d.Workspaces,
				Roots: d.Roots, Git: git},
			Settings: Settings(cfg.PolicyFor(d)),
		})
	}
	remotes, err := remoteSources(cfg)
	if err != nil {
		return nil, err
	}
	return append(out, remotes...), nil
}

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
		out = append(out, engine.Source{Name: name, Backend: &e2b.Backend{Client: c, Metadata: s.Metadata}, Settings: Settings(cfg.PolicyFor(s))})
	}
	for i, s := range cfg.Daytona {
		name := fmt.Sprintf("daytona[%d]", i)
		c, err := client(s.URL(), s.KeyEnv(), s.APIKeyFile, s.Rate, remote.BearerAuth)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, engine.Source{Name: name, Backend: &daytona.Backend{Client: c, Labels: s.Labels}, Settings: Settings(cfg.PolicyFor(s))})
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
		out = append(out, engine.Source{Name: name, Backend: b, Settings: Settings(cfg.PolicyFor(s))})
	}
	return out, nil
}

// Settings turns a resolved configuration policy into the policy package's.
func Settings(p config.Policy) policy.Settings {
	return policy.Settings{CacheDirs: p.CacheDirs, DiskHigh: p.DiskHigh, DiskLow: p.DiskLow, Retention: p.Retention,
		Grace: p.Grace, IdleSuspend: p.IdleSuspend, MaxLifetime: p.MaxLifetime, RegisteredOnly: p.RegisteredOnly}
}
