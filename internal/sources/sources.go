package sources

import (
	"fmt"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/policy"
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
			Name:     fmt.Sprintf("dirs[%d]", i),
			Backend:  &rundir.Backend{Root: d.Root, Home: d.Home, Workspaces: d.Workspaces, Git: git},
			Settings: Settings(cfg.PolicyFor(d)),
		})
	}
	return out, nil
}

// Settings turns a resolved configuration policy into the policy package's.
func Settings(p config.Policy) policy.Settings {
	return policy.Settings{CacheDirs: p.CacheDirs, DiskHigh: p.DiskHigh, DiskLow: p.DiskLow, Retention: p.Retention,
		Grace: p.Grace, IdleSuspend: p.IdleSuspend, MaxLifetime: p.MaxLifetime, RegisteredOnly: p.RegisteredOnly}
}
