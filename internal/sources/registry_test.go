package sources

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
)

// TestNamesSurviveReordering: a source's name (and so every runtime key it
// lists) does not change when tables are reordered or added.
func TestNamesSurviveReordering(t *testing.T) {
	testEnv(t)
	a := mustLoad(t, `
[[http]]
endpoint = "https://a.example/v1"
token_env = "A"
[[http]]
endpoint = "https://b.example/v1"
token_env = "B"
[[dirs]]
root = "/srv/runs"
`)
	b := mustLoad(t, `
[[dirs]]
root = "/srv/other"
[[http]]
endpoint = "https://c.example/v1"
token_env = "C"
[[http]]
endpoint = "https://b.example/v1"
token_env = "B"
[[dirs]]
root = "/srv/runs"
[[http]]
endpoint = "https://a.example/v1"
token_env = "A"
`)
	names := func(c *config.Config) []string {
		var out []string
		for _, s := range c.Sources {
			out = append(out, s.Name())
		}
		return out
	}
	for _, n := range names(a) {
		if !slices.Contains(names(b), n) {
			t.Errorf("source %q of the first file is not in the reordered one: %v", n, names(b))
		}
	}
	if got := names(a); !slices.Equal(got, []string{"dirs:/srv/runs", "http:https://a.example/v1", "http:https://b.example/v1"}) {
		t.Errorf("names %v", got)
	}
}

// TestTwoTablesOneIdentityNeedNames: two tables that identify the same way
// (one selector, two accounts) must be named apart; once named, they load.
func TestTwoTablesOneIdentityNeedNames(t *testing.T) {
	testEnv(t)
	doc := "[[e2b]]\nmetadata = { a = \"1\" }\n[[e2b]]\nmetadata = { a = \"1\" }\napi_key_file = \"/k\"\n"
	_, path, err := loadDoc(t, doc)
	checkProblems(t, err, path, problem{3, "e2b[1]", `is the same source as e2b[0] (both named "e2b:https://api.e2b.app a=1"): give one of them its own name = "..."`})
	c := mustLoad(t, doc+"name = \"team-b\"\n")
	if c.Sources[1].Name() != "team-b" || c.Sources[1].Label() != `[[e2b]] name = "team-b"` {
		t.Errorf("named: %q %q", c.Sources[1].Name(), c.Sources[1].Label())
	}
	_, path, err = loadDoc(t, "[[dirs]]\nroot = \"/d\"\nname = \"no/slash\"\n")
	checkProblems(t, err, path, problem{3, "dirs[0].name", `"no/slash": letters, digits, ".", "_" and "-", at most 64, starting with a letter or digit`})
}

// TestBuildEveryKind: Build makes one engine source per table of every
// registered kind, with the backend the kind names, the source's stable
// name and label, its policy and its listing bound; it does no I/O (the
// example's roots, endpoints and credentials do not exist here).
func TestBuildEveryKind(t *testing.T) {
	testEnv(t)
	c, err := Load(example)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != len(c.Sources) {
		t.Fatalf("%d engine sources for %d tables", len(srcs), len(c.Sources))
	}
	kinds := map[string]bool{}
	for i, s := range srcs {
		tab := c.Sources[i]
		k, _ := KindOf(tab.Kind)
		kinds[k.Table] = true
		name := tab.Name()
		if k.Local {
			name = LocalName("host-a", name) // the example is a fleet's, of replica host-a
		}
		if s.Shared == k.Local {
			t.Errorf("%s: shared %v, local kind %v", tab.Key(), s.Shared, k.Local)
		}
		if s.Name != name || s.Label != tab.Label() || s.Backend.Name() != k.Backend || s.ListTimeout != tab.ListTimeout() {
			t.Errorf("%s: built %+v", tab.Key(), s)
		}
		if _, ok := backend.As[backend.Lister](s.Backend); !ok {
			t.Errorf("%s: its backend cannot list", tab.Key())
		}
	}
	for _, k := range Kinds {
		if !kinds[k.Table] {
			t.Errorf("the example has no [[%s]] to build", k.Table)
		}
	}
}

// TestKindsAreDocumented: every registered kind has its documentation:
// a "## <backend>" section in docs/backends.md, its summary and a row for
// each of its own keys in docs/configuration.md, and a table in the
// example (TestExampleIsComplete holds the example to every key).
func TestKindsAreDocumented(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile("../../docs/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	backends, conf, ex := read("backends.md"), read("configuration.md"), read("example.toml")
	common := map[string]bool{"name": true, "list_timeout": true}
	for key := range config.Keys(nil) {
		_ = key
	}
	for _, k := range Kinds {
		if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(k.Backend) + `\b`).MatchString(backends) {
			t.Errorf("docs/backends.md has no \"## %s\" section", k.Backend)
		}
		if !strings.Contains(conf, k.Summary) {
			t.Errorf("docs/configuration.md lacks the summary of [[%s]]: %q", k.Table, k.Summary)
		}
		if !strings.Contains(ex, "[["+k.Table+"]]") {
			t.Errorf("docs/example.toml has no [[%s]]", k.Table)
		}
		for _, key := range config.Keys([]config.Kind{k.Kind}) {
			table, leaf, ok := strings.Cut(key, "[].")
			if !ok || table != k.Table || strings.Contains(leaf, ".") || common[leaf] || isPolicyKey(leaf) {
				continue
			}
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(leaf) + "`[^|\\n]*\\|[^|\\n]*`\\[\\[" + regexp.QuoteMeta(k.Table) + "\\]\\]`")
			if !row.MatchString(conf) {
				t.Errorf("docs/configuration.md has no row for %s of [[%s]]", leaf, k.Table)
			}
		}
	}
	for leaf := range common {
		if !regexp.MustCompile("(?m)^\\| `" + leaf + "` \\| every source").MatchString(conf) {
			t.Errorf("docs/configuration.md has no row for %s of every source", leaf)
		}
	}
}

func isPolicyKey(leaf string) bool {
	for _, k := range config.Keys(nil) {
		if k == "policy."+leaf {
			return true
		}
	}
	return false
}
