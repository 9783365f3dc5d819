package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/dockerclient"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// Env is what building a source's backend may use.
type Env struct {
	Config *config.Config
	// Git runs git for the local backends.
	Git gitcmd.Runner
	// StateDir is the state folder (the ledger's): caches go below it.
	StateDir string
	// Registered lists the IDs hosts registered (POST /v1/runtimes) for
	// the source named source, of backend backendName, and that are still
	// there: the runtimes of a backend that cannot list its provider
	// (cloudflare). Nil without a ledger: such a source then fails to
	// list, saying so.
	Registered func(ctx context.Context, source, backendName string) ([]string, error)

	docker map[string]*dockerclient.Client // one client per Engine address
	source string                          // the name of the source being built
}

// Options are what Build may use besides the configuration.
type Options struct {
	// Registered: see Env.Registered.
	Registered func(ctx context.Context, source, backendName string) ([]string, error)
}

// Build returns one engine source per source table of cfg, in the order
// of the registry, then of the file: its stable name, its label, its
// backend, its effective policy and its listing bound.
func Build(cfg *config.Config) ([]engine.Source, error) { return BuildWith(cfg, Options{}) }

// BuildWith is Build with opts. Close the sources it returns when they
// are replaced or no longer used (Close): some hold clients (watch
// caches, connections).
func BuildWith(cfg *config.Config, opts Options) ([]engine.Source, error) {
	env := &Env{Config: cfg, Git: gitcmd.Runner{Timeout: 60 * time.Second}, StateDir: filepath.Dir(cfg.Ledger.Path),
		Registered: opts.Registered, docker: map[string]*dockerclient.Client{}}
	var out []engine.Source
	for _, src := range cfg.Sources {
		k, ok := KindOf(src.Kind)
		if !ok {
			Close(out)
			return nil, fmt.Errorf("%s: no kind of source %q is registered", src.Key(), src.Kind)
		}
		env.source = src.Name()
		b, err := k.Build(env, src.Table)
		if err != nil {
			Close(out)
			return nil, fmt.Errorf("%s: %w", src.Label(), err)
		}
		name := src.Name()
		if cfg.Fleet() && k.Local {
			// This replica's own: two hosts' [[dirs]] of one root are
			// two sources, whose runtimes never share a key.
			name = LocalName(cfg.ReplicaName(), name)
		}
		out = append(out, engine.Source{Name: name, Label: src.Label(), Kind: src.Kind, Backend: b,
			Settings: cfg.PolicyFor(src.Table), ListTimeout: src.ListTimeout(), Shared: !k.Local})
	}
	return out, nil
}

// LocalName is the name of a fleet replica's local source: the replica's
// name, a slash, the source's own name ("host-a/dirs:/srv/runs").
func LocalName(replica, source string) string { return replica + "/" + source }

// ReplicaOf returns the replica a local source's name carries, if any.
func ReplicaOf(source string) (string, bool) {
	r, rest, ok := strings.Cut(source, "/")
	if !ok || r == "" || strings.Contains(r, ":") || rest == "" {
		return "", false
	}
	return r, true
}

// Close closes what the sources' backends hold (a Kubernetes backend's
// watch caches, a Modal backend's connection): every backend that is an
// io.Closer, looking through decorators. The daemon's reload and every
// App's Close call it for the sources they replace or end.
func Close(srcs []engine.Source) error {
	var errs []error
	for _, s := range srcs {
		if c, ok := backend.As[io.Closer](s.Backend); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", s.Label, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sourceName is the stable name of the source being built.
func (e *Env) sourceName(config.Table) string { return e.source }

// dockerClient returns the client of an Engine address, made once.
func (e *Env) dockerClient(host string) (*dockerclient.Client, error) {
	if c, ok := e.docker[host]; ok {
		return c, nil
	}
	c, err := dockerclient.New(host)
	if err != nil {
		return nil, err
	}
	e.docker[host] = c
	return c, nil
}

// AdHoc adds the sources of the command line to cfg: a [[worktrees]] repo
// for each repository and a [[dirs]] root for each folder, exactly as if
// written in a file (so their names, and their runtimes' keys, are the same
// as a file's would be). Relative paths are taken from the current folder.
func AdHoc(cfg *config.Config, repos, dirs []string) error {
	for _, r := range repos {
		p, err := config.FlagPath(r)
		if err != nil {
			return fmt.Errorf("--repo: %w", err)
		}
		cfg.AddSource(Worktrees.Kind, &WorktreesTable{Repo: p})
	}
	for _, d := range dirs {
		p, err := config.FlagPath(d)
		if err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		cfg.AddSource(Dirs.Kind, &DirsTable{Root: p})
	}
	return nil
}
