package sources

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/ignored"
	"github.com/reclaimer/reclaimer/internal/policy"
)

type policySettings = policy.Settings

// TestRebuildableAndKeepLists: the dependencies step's lists default to
// the built-in ones; "defaults" extends them explicitly, a list without it
// replaces them, a source's list overrides [policy]'s; bad entries are
// configuration errors naming the entry.
func TestRebuildableAndKeepLists(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, `
[policy]
rebuildable = ["defaults", "elm-stuff"]
keep = ["defaults", "*.sqlite3"]

[[dirs]]
root = "/d"

[[dirs]]
root = "/e"
rebuildable = ["node_modules"]
keep = []

[[worktrees]]
root = "/w"
keep = ["*.age"]
`)
	of := func(name string) policySettings {
		s, ok := c.SourceNamed(name)
		if !ok {
			t.Fatalf("no source %s", name)
		}
		return c.PolicyFor(s.Table)
	}
	d, e, w := of("dirs:/d"), of("dirs:/e"), of("worktrees:/w")
	if want := append(slices.Clone(ignored.DefaultRebuildable), "elm-stuff"); !reflect.DeepEqual(d.Rebuildable, want) {
		t.Errorf("[policy] extends: %v", d.Rebuildable)
	}
	if want := append(slices.Clone(ignored.DefaultKeep), "*.sqlite3"); !reflect.DeepEqual(d.Keep, want) {
		t.Errorf("[policy] keep extends: %v", d.Keep)
	}
	if !reflect.DeepEqual(e.Rebuildable, []string{"node_modules"}) || e.Keep == nil || len(e.Keep) != 0 {
		t.Errorf("a source replaces: %v %v", e.Rebuildable, e.Keep)
	}
	if !reflect.DeepEqual(w.Keep, []string{"*.age"}) || !slices.Contains(w.Rebuildable, "elm-stuff") {
		t.Errorf("a source overrides one list and inherits the other: %v %v", w.Keep, w.Rebuildable)
	}
	none := mustLoad(t, "[[dirs]]\nroot = \"/d\"\n")
	if p := none.PolicyFor(none.Sources[0].Table); p.Rebuildable != nil || p.Keep != nil {
		t.Errorf("unset (nil: the built-in lists): %v %v", p.Rebuildable, p.Keep)
	}

	for _, tc := range []struct{ doc, key, msg string }{
		{"[policy]\nrebuildable = [\"a/b\"]\n", "policy.rebuildable[0]", "a folder name"},
		{"[policy]\nrebuildable = [\"\"]\n", "policy.rebuildable[0]", "a folder name"},
		{"[policy]\nrebuildable = [\"defaults\", \".GIT\"]\n", "policy.rebuildable[1]", "never rebuildable"},
		{"[policy]\nrebuildable = [\"*_cache\"]\n", "policy.rebuildable[0]", "not patterns"},
		{"[policy]\nkeep = [\"[\"]\n", "policy.keep[0]", "a name pattern"},
		{"[policy]\nkeep = [\"secrets/*\"]\n", "policy.keep[0]", "a name pattern"},
		{"[[dirs]]\nroot = \"/d\"\nkeep = [\"ok\", \"\"]\n", "dirs[0].keep[1]", "a name pattern"},
	} {
		_, _, err := loadDoc(t, tc.doc)
		errs := problems(t, err)
		if len(errs) != 1 || errs[0].Key != tc.key || !strings.Contains(errs[0].Msg, tc.msg) {
			t.Errorf("%q: %v, want %s: %s", tc.doc, err, tc.key, tc.msg)
		}
	}
}
