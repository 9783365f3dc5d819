package sources

import (
	"maps"
	"testing"
	"time"
)

func TestDockerSource(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, `
[[docker]]
labels = { "reclaimer.scope" = "abc", team = "x" }
home = "/var/openhands/.openhands"
workspaces = ["/workspace"]
roots = ["~/runtime-data"]
retention = "2h"

[[docker]]
openhands_runtime_owner = "own"
openhands_execution_scope = "exec"
[docker.labels]
"extra.label" = "1"
`)
	dockers := tables[*DockerTable](c)
	if len(dockers) != 2 {
		t.Fatalf("%d docker sources", len(dockers))
	}
	d := dockers[0]
	if !maps.Equal(d.Selector(), map[string]string{"reclaimer.scope": "abc", "team": "x"}) || d.Home != "/var/openhands/.openhands" ||
		len(d.Roots) != 1 || d.Roots[0] != "/home/tester/runtime-data" {
		t.Errorf("first source: %+v", d)
	}
	if got := c.PolicyFor(dockers[0]).Retention; got != 2*time.Hour {
		t.Errorf("retention %v, want the source's 2h", got)
	}
	want := map[string]string{OpenHandsRuntimeOwnerLabel: "own", OpenHandsExecutionScopeLabel: "exec", "extra.label": "1"}
	if got := dockers[1].Selector(); !maps.Equal(got, want) {
		t.Errorf("presets: %v, want %v", got, want)
	}
}

func TestDockerSourceProblems(t *testing.T) {
	testEnv(t)
	for _, tc := range []struct {
		name, doc string
		want      []problem
	}{
		{"no selector", "[[docker]]\nroots = [\"/srv/rt\"]\n",
			[]problem{{1, "docker[0]", "set labels (or openhands_runtime_owner, openhands_execution_scope): without a selector every container of the host would be managed"}}},
		{"label not a string", "[[docker]]\nlabels = { scope = 1 }\n",
			[]problem{{2, "docker[0].labels.scope", "want a string, got the integer 1"}}},
		{"labels not a table", "[[docker]]\nlabels = \"scope=1\"\n",
			[]problem{{2, "docker[0].labels", `want a table of strings such as {"name" = "value"}, got the string "scope=1"`}}},
		{"dotted label name", "[[docker]]\n[docker.labels]\nreclaimer.scope = \"a\"\n",
			[]problem{{3, "docker[0].labels.reclaimer", `a name with dots must be quoted: write docker[0].labels."reclaimer.scope"`}}},
		{"relative container paths", "[[docker]]\nlabels = { a = \"b\" }\nhome = \"home\"\nworkspaces = [\"/w/\"]\n",
			[]problem{
				{3, "docker[0].home", `"home" must be an absolute path inside the container`},
				{4, "docker[0].workspaces[0]", `"/w/" is not clean: write "/w"`},
			}},
		{"root overlaps a dirs root", "[[dirs]]\nroot = \"/srv/rt\"\n[[docker]]\nlabels = { a = \"b\" }\nroots = [\"/srv/rt/x\"]\n",
			[]problem{{5, "docker[0].roots[0]", "/srv/rt/x is inside dirs[0].root (/srv/rt): a folder must belong to one source"}}},
		{"root is /", "[[docker]]\nlabels = { a = \"b\" }\nroots = [\"/\"]\n",
			[]problem{{3, "docker[0].roots[0]", `refusing to manage "/"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tc.doc)
			checkProblems(t, err, path, tc.want...)
		})
	}
}
