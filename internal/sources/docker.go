package sources

import (
	"fmt"
	"strings"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/config"
)

// Docker is [[docker]]: containers of the Docker Engine chosen by labels,
// with host folders bind-mounted into them.
var Docker = define("docker", docker.Name,
	"every container of the Docker Engine carrying every label of the selector (`labels`, or an OpenHands preset); its files are the bind mounts under `roots`",
	func(env *Env, t *DockerTable) (backend.Backend, error) {
		c, err := env.dockerClient(t.Host)
		if err != nil {
			return nil, err
		}
		return &docker.Backend{Client: c, Labels: t.Selector(), Home: t.Home, Workspaces: t.Workspaces,
			Roots: t.Roots, Git: env.Git}, nil
	}).local()

// Label names of the OpenHands presets.
const (
	OpenHandsRuntimeOwnerLabel   = "ai.openhands.runtime-owner"
	OpenHandsExecutionScopeLabel = "ai.openhands.execution-scope"
)

// DockerTable is one [[docker]] table: every container whose labels
// match is a runtime; its files are the host sources of its bind mounts.
type DockerTable struct {
	// Labels (labels) select the containers: every name = value pair must
	// be on a container, e.g. labels = { "reclaimer.scope" = "abc" }.
	Labels map[string]string `toml:"labels"`
	// OpenHandsRuntimeOwner (openhands_runtime_owner) adds the label
	// ai.openhands.runtime-owner = <value>: the containers of one
	// OpenHands agent server.
	OpenHandsRuntimeOwner string `toml:"openhands_runtime_owner"`
	// OpenHandsExecutionScope (openhands_execution_scope) adds the label
	// ai.openhands.execution-scope = <value>: its execution-only sandboxes.
	OpenHandsExecutionScope string `toml:"openhands_execution_scope"`
	// Home (home) is the container path of the sandbox home, e.g.
	// "/var/openhands/.openhands": the bind mount there is the home whose
	// cache_dirs are emptied. Absolute, clean. Optional.
	Home string `toml:"home"`
	// Workspaces (workspaces) are container paths of workspaces (shed of
	// dependencies under disk pressure, archived before removal).
	Workspaces []string `toml:"workspaces"`
	// Roots (roots) are host folders under which bind-mount sources are
	// managed; nothing outside them is ever touched. Absolute, "~/"
	// expands; not "/". Their direct child folders that no container
	// mounts are listed as unowned.
	Roots []string `toml:"roots"`
	// Host (host) is the Engine's address, e.g. "unix:///run/docker.sock".
	// Default: $DOCKER_HOST, else the platform's default socket.
	Host string `toml:"host"`

	config.SourceBase
}

// Selector returns the labels a container must carry: Labels with the
// presets added.
func (t *DockerTable) Selector() map[string]string {
	sel := map[string]string{}
	for k, v := range t.Labels {
		sel[k] = v
	}
	if t.OpenHandsRuntimeOwner != "" {
		sel[OpenHandsRuntimeOwnerLabel] = t.OpenHandsRuntimeOwner
	}
	if t.OpenHandsExecutionScope != "" {
		sel[OpenHandsExecutionScopeLabel] = t.OpenHandsExecutionScope
	}
	return sel
}

// Identity implements config.Table: the selector, and the Engine when it
// is not the default one.
func (t *DockerTable) Identity() string {
	id := config.Pairs(t.Selector())
	if t.Host != "" {
		id = t.Host + " " + id
	}
	return id
}

// Describe implements config.Table: the selector as written.
func (t *DockerTable) Describe() string {
	var parts []string
	if len(t.Labels) > 0 {
		parts = append(parts, "labels = "+config.Quoted(t.Labels))
	}
	if t.OpenHandsRuntimeOwner != "" {
		parts = append(parts, fmt.Sprintf("openhands_runtime_owner = %q", t.OpenHandsRuntimeOwner))
	}
	if t.OpenHandsExecutionScope != "" {
		parts = append(parts, fmt.Sprintf("openhands_execution_scope = %q", t.OpenHandsExecutionScope))
	}
	if t.Host != "" {
		parts = append(parts, fmt.Sprintf("host = %q", t.Host))
	}
	return strings.Join(parts, ", ")
}

// Paths implements config.Table.
func (t *DockerTable) Paths() []config.Path {
	out := make([]config.Path, len(t.Roots))
	for j := range t.Roots {
		out[j] = config.Path{Key: fmt.Sprintf("roots[%d]", j), Value: &t.Roots[j], Role: config.PathDirs}
	}
	return out
}

// Check implements config.Table.
func (t *DockerTable) Check(c *config.Check) {
	for name := range t.Labels {
		if strings.TrimSpace(name) == "" {
			c.Add("labels", "a label name is empty")
		}
	}
	if len(t.Selector()) == 0 {
		c.Add("", "set labels (or openhands_runtime_owner, openhands_execution_scope): without a selector every container of the host would be managed")
	}
	if t.Home != "" {
		c.ContainerPath("home", t.Home)
	}
	for j, w := range t.Workspaces {
		c.ContainerPath(fmt.Sprintf("workspaces[%d]", j), w)
	}
}
