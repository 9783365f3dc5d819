package sources

import (
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/agentsandbox"
	"github.com/reclaimer/reclaimer/internal/config"
)

// AgentSandbox is [[agent_sandbox]]: the Sandbox custom resources
// (agents.x-k8s.io/v1beta1) of a namespace matching a selector.
var AgentSandbox = define("agent_sandbox", agentsandbox.Name,
	"every agent-sandbox `Sandbox` (`agents.x-k8s.io/v1beta1`) of `namespace` matching `selector`",
	func(env *Env, t *AgentSandboxTable) (backend.Backend, error) {
		c, err := kubeClient(t.Cluster)
		if err != nil {
			return unbuilt{agentsandbox.Name, err}, nil
		}
		return agentsandbox.New(c, agentsandbox.Options{Namespace: t.Namespace, Selector: t.Selector,
			SnapshotClass: t.SnapshotClass, SnapshotTimeout: dur(t.SnapshotTimeout), Archive: t.Archive})
	})

// AgentSandboxTable is one [[agent_sandbox]] table: the keys of
// [[kubernetes]]'s cluster (namespace, selector, kubeconfig, context,
// archive, snapshot_class, snapshot_timeout, rate).
type AgentSandboxTable struct {
	Cluster

	config.SourceBase
}

// Identity implements config.Table: the cluster, namespace and selector.
func (t *AgentSandboxTable) Identity() string { return t.Cluster.identity() }

// Describe implements config.Table.
func (t *AgentSandboxTable) Describe() string { return t.Cluster.describe() }

// Paths implements config.Table.
func (t *AgentSandboxTable) Paths() []config.Path { return t.Cluster.paths() }

// Check implements config.Table.
func (t *AgentSandboxTable) Check(c *config.Check) { t.Cluster.check(c) }
