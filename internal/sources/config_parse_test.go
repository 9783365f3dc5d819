package sources

import (
	"slices"

	"errors"
	"fmt"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ignored"
	"github.com/reclaimer/reclaimer/internal/policy"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadExample(t *testing.T) {
	testEnv(t)
	c, err := Load(example)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ledger.Path != "/var/lib/reclaimer/ledger.db" || c.Archive.Dir != "/var/lib/reclaimer/archives" {
		t.Errorf("ledger %q, archive %q", c.Ledger.Path, c.Archive.Dir)
	}
	wantPolicy := config.PolicyOverrides{
		CacheDirs:      []string{".cache", ".npm", ".cargo/registry"},
		Rebuildable:    []string{"defaults", "elm-stuff", ".terraform"},
		Keep:           []string{"defaults", "*.sqlite3", "*.age"},
		DiskHigh:       ptr[config.Fraction](0.85),
		DiskLow:        ptr[config.Fraction](0.80),
		Retention:      ptr(config.Duration(days(14))),
		Grace:          ptr(config.Duration(36 * time.Hour)),
		IdleSuspend:    ptr(config.Duration(20 * time.Minute)),
		MaxLifetime:    ptr(config.Duration(12 * time.Hour)),
		RegisteredOnly: ptr(false),
	}
	if !reflect.DeepEqual(c.Policy, wantPolicy) {
		t.Errorf("policy:\n got  %s\n want %s", dump(c.Policy), dump(wantPolicy))
	}
	wantWorktrees := []WorktreesTable{
		{Repo: "/home/me/project", SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{Retention: ptr(config.Duration(days(3)))}}},
		{Root: "/srv/agents/worktrees", SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{Retention: ptr(config.Duration(0)), DiskHigh: ptr(config.Fraction(0))}}},
	}
	if got := tables[*WorktreesTable](c); len(got) != 2 || !reflect.DeepEqual(*got[0], wantWorktrees[0]) || !reflect.DeepEqual(*got[1], wantWorktrees[1]) {
		t.Errorf("worktrees:\n got  %+v\n want %+v", got, wantWorktrees)
	}
	wantDirs := []DirsTable{{
		Root:       "/srv/agents/runs",
		Home:       "persistence",
		Workspaces: []string{"workspace", "shared/out"},
		SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{
			DiskHigh:       ptr[config.Fraction](0.9),
			CacheDirs:      []string{".cache", ".npm", ".gradle/caches"},
			RegisteredOnly: ptr(true),
		}},
	}}
	if got := tables[*DirsTable](c); len(got) != 1 || !reflect.DeepEqual(*got[0], wantDirs[0]) {
		t.Errorf("dirs:\n got  %+v\n want %+v", got, wantDirs)
	}

	global := policy.Settings{
		CacheDirs:   []string{".cache", ".npm", ".cargo/registry"},
		Rebuildable: append(slices.Clone(ignored.DefaultRebuildable), "elm-stuff", ".terraform"),
		Keep:        append(slices.Clone(ignored.DefaultKeep), "*.sqlite3", "*.age"),
		DiskHigh:    0.85, DiskLow: 0.80,
		Retention: days(14), Grace: 36 * time.Hour, IdleSuspend: 20 * time.Minute, MaxLifetime: 12 * time.Hour,
	}
	repo := global
	repo.Retention = days(3)
	root := global
	root.Retention, root.DiskHigh, root.DiskLow = 0, 0, 0
	dirs := global
	dirs.DiskHigh, dirs.DiskLow = 0.9, 0.85
	dirs.CacheDirs = []string{".cache", ".npm", ".gradle/caches"}
	dirs.RegisteredOnly = true
	wantServer := config.ServerSettings{Listen: "127.0.0.1:7390", Interval: 5 * time.Minute, TokenFile: "/etc/reclaimer/api.token",
		LogFormat: "json", LogLevel: "info", HoldWait: 10 * time.Second, Name: "host-a", LeaderLease: 15 * time.Second,
		UsageRetention: 30 * 24 * time.Hour, JournalRetention: 90 * 24 * time.Hour, PassTimeout: 30 * time.Minute, NoticeHorizon: 72 * time.Hour}
	if got := c.ServerSettings(); got != wantServer {
		t.Errorf("server:\n got  %+v\n want %+v", got, wantServer)
	}
	wantNotify := []config.Notify{{URL: "https://hooks.example.com/reclaimer", Events: []string{"scheduled", "archived", "failed"}, Secret: "change-me"},
		{URL: "https://alerts.example.com/reclaimer", Events: []string{"failed"}, SecretFile: "/etc/reclaimer/alerts.secret",
			Header: "Authorization", HeaderFile: "/etc/reclaimer/alerts.auth"}}
	if !reflect.DeepEqual(c.Notify, wantNotify) {
		t.Errorf("notify:\n got  %+v\n want %+v", c.Notify, wantNotify)
	}
	for _, tt := range []struct {
		src  config.Table
		want policy.Settings
	}{
		{nil, global},
		{tables[*WorktreesTable](c)[0], repo},
		{tables[*WorktreesTable](c)[1], root},
		{tables[*DirsTable](c)[0], dirs},
	} {
		if got := c.PolicyFor(tt.src); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PolicyFor(%v):\n got  %+v\n want %+v", tt.src, got, tt.want)
		}
	}
}

// dump prints overrides with the pointers followed.
func dump(o config.PolicyOverrides) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cache_dirs=%q rebuildable=%q keep=%q", o.CacheDirs, o.Rebuildable, o.Keep)
	for _, f := range []struct {
		name string
		v    fmt.Stringer
	}{{"disk_high", o.DiskHigh}, {"disk_low", o.DiskLow}, {"retention", o.Retention}, {"grace", o.Grace}, {"idle_suspend", o.IdleSuspend}, {"max_lifetime", o.MaxLifetime}} {
		if !reflect.ValueOf(f.v).IsNil() {
			fmt.Fprintf(&b, " %s=%v", f.name, f.v)
		}
	}
	return b.String()
}

func TestParseEveryKey(t *testing.T) {
	testEnv(t)
	const doc = `
[ledger]
path = "/data/ledger.db"

[policy]
cache_dirs = ["c1", "c2/sub"]
disk_high = 0.9
disk_low = "70%"
retention = "1w"
grace = "90m"
idle_suspend = "30s"
max_lifetime = "1d12h"

[archive]
dir = "/data/archives"

[[worktrees]]
repo = "/r"
cache_dirs = []
disk_high = "95%"
disk_low = 0.5
retention = "2d"
grace = "0"
idle_suspend = "1h"
max_lifetime = "off"

[[worktrees]]
root = "/w"

[[dirs]]
root = "/d"
home = "h"
workspaces = ["a", "b/c", "."]
cache_dirs = [".x"]
disk_high = 0.6
retention = "off"
grace = "1s"
idle_suspend = "2m"
max_lifetime = "3h"
`
	c := mustLoad(t, doc)
	wantLedger, wantArchive := config.Ledger{Path: "/data/ledger.db"}, config.Archive{Dir: "/data/archives"}
	wantPolicy := config.PolicyOverrides{
		CacheDirs: []string{"c1", "c2/sub"},
		DiskHigh:  ptr[config.Fraction](0.9), DiskLow: ptr[config.Fraction](0.7),
		Retention: ptr(config.Duration(days(7))), Grace: ptr(config.Duration(90 * time.Minute)),
		IdleSuspend: ptr(config.Duration(30 * time.Second)), MaxLifetime: ptr(config.Duration(36 * time.Hour)),
	}
	wantWorktrees := []WorktreesTable{
		{Repo: "/r", SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{
			CacheDirs: []string{},
			DiskHigh:  ptr[config.Fraction](0.95), DiskLow: ptr[config.Fraction](0.5),
			Retention: ptr(config.Duration(days(2))), Grace: ptr(config.Duration(0)),
			IdleSuspend: ptr(config.Duration(time.Hour)), MaxLifetime: ptr(config.Duration(0)),
		}}},
		{Root: "/w"},
	}
	wantDirs := []DirsTable{{
		Root: "/d", Home: "h", Workspaces: []string{"a", "b/c", "."},
		SourceBase: config.SourceBase{PolicyOverrides: config.PolicyOverrides{
			CacheDirs: []string{".x"}, DiskHigh: ptr[config.Fraction](0.6),
			Retention: ptr(config.Duration(0)), Grace: ptr(config.Duration(time.Second)),
			IdleSuspend: ptr(config.Duration(2 * time.Minute)), MaxLifetime: ptr(config.Duration(3 * time.Hour)),
		}},
	}}
	wts, dirs := tables[*WorktreesTable](c), tables[*DirsTable](c)
	if c.Ledger != wantLedger || !reflect.DeepEqual(c.Archive, wantArchive) || !reflect.DeepEqual(c.Policy, wantPolicy) ||
		len(wts) != 2 || !reflect.DeepEqual(*wts[0], wantWorktrees[0]) || !reflect.DeepEqual(*wts[1], wantWorktrees[1]) ||
		len(dirs) != 1 || !reflect.DeepEqual(*dirs[0], wantDirs[0]) || len(c.Sources) != 3 {
		t.Errorf("got  %+v\nwant %+v %+v %+v", *c, wantPolicy, wantWorktrees, wantDirs)
	}

	for _, tt := range []struct {
		name string
		src  config.Table
		want policy.Settings
	}{
		{"worktrees[0]", wts[0], policy.Settings{
			CacheDirs: []string{}, DiskHigh: 0.95, DiskLow: 0.5,
			Retention: days(2), Grace: 0, IdleSuspend: time.Hour, MaxLifetime: 0,
		}},
		{"worktrees[1]", wts[1], policy.Settings{
			CacheDirs: []string{"c1", "c2/sub"}, DiskHigh: 0.9, DiskLow: 0.7,
			Retention: days(7), Grace: 90 * time.Minute, IdleSuspend: 30 * time.Second, MaxLifetime: 36 * time.Hour,
		}},
		{"dirs[0]", dirs[0], policy.Settings{
			CacheDirs: []string{".x"}, DiskHigh: 0.6, DiskLow: 0.55,
			Retention: 0, Grace: time.Second, IdleSuspend: 2 * time.Minute, MaxLifetime: 3 * time.Hour,
		}},
	} {
		if got := c.PolicyFor(tt.src); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PolicyFor(%s):\n got  %+v\n want %+v", tt.name, got, tt.want)
		}
	}

	// Lines of keys, used for Validate's messages.
	for key, line := range map[string]int{
		"ledger": 2, "ledger.path": 3, "policy.disk_low": 8, "worktrees[0]": 17,
		"worktrees[0].max_lifetime": 25, "worktrees[1].root": 28, "dirs[0]": 30, "dirs[0].max_lifetime": 39,
	} {
		if got := c.Line(key); got != line {
			t.Errorf("lineOf(%q) = %d; want %d", key, got, line)
		}
	}
}

func TestParseAlternativeSyntax(t *testing.T) {
	testEnv(t)
	// Inline tables, dotted keys and quoted keys mean the same as tables.
	const doc = `
policy.retention = "3d"
policy = { }
`
	_, path, err := loadDoc(t, doc)
	var e *config.Error
	if !errors.As(err, &e) || e.File != path || e.Line != 3 || e.Column != 1 || e.Key != "policy" {
		t.Errorf("redefined policy: got %v; want an error at 3:1", err)
	}

	c := mustLoad(t, `
"policy".retention = "3d"
archive = { dir = "/a" }
worktrees = [ { repo = "/r", grace = "1h" }, { root = "/w" } ]
dirs = [ { root = "/d", workspaces = [ "ws" ] } ]
`)
	wts, dirs := tables[*WorktreesTable](c), tables[*DirsTable](c)
	if *c.Policy.Retention != config.Duration(days(3)) || c.Archive.Dir != "/a" ||
		len(wts) != 2 || wts[0].Repo != "/r" || *wts[0].Grace != config.Duration(time.Hour) ||
		wts[1].Root != "/w" || len(dirs) != 1 || dirs[0].Workspaces[0] != "ws" {
		t.Errorf("got %+v", c)
	}
	if c.Line("worktrees[1].root") != 4 || c.Line("worktrees[1]") != 4 {
		t.Errorf("lines: worktrees[1] at %d, its root at %d; want 4", c.Line("worktrees[1]"), c.Line("worktrees[1].root"))
	}
}

func TestUnknownKeys(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"top level", "[policy]\nretention = \"1d\"\n\n# comment\n", nil},
		{"top level key", "foo = 1\n", []problem{{1, "foo", `unknown key "foo" at top level`}}},
		{"top level near miss", "\n\nlegder.path = \"/x\"\n", []problem{{3, "legder", `unknown key "legder" at top level; did you mean "ledger"?`}}},
		{"in policy", "[policy]\ndisk_high = 0.9\n\n\n\n\n\n\n\n\n\ndsik_high = 0.85\n",
			[]problem{{12, "policy.dsik_high", `unknown key "dsik_high" in [policy]; did you mean "disk_high"?`}}},
		{"several in policy", "[policy]\nfoo = 1\nretension = \"1d\"\n",
			[]problem{
				{2, "policy.foo", `unknown key "foo" in [policy]`},
				{3, "policy.retension", `unknown key "retension" in [policy]; did you mean "retention"?`},
			}},
		{"in second worktrees", "[[worktrees]]\nrepo = \"/a\"\n[[worktrees]]\nrepo = \"/b\"\nretain = \"1d\"\n",
			[]problem{{5, "worktrees[1].retain", `unknown key "retain" in worktrees[1]`}}},
		{"repo in dirs", "[[dirs]]\nroot = \"/a\"\nrepo = \"/b\"\n",
			[]problem{{3, "dirs[0].repo", `unknown key "repo" in dirs[0]`}}},
		{"table", "[polcy]\nretention = \"1d\"\nfoo = 2\n",
			[]problem{{1, "polcy", `unknown table [polcy]; did you mean "policy"?`}}},
		{"sub-table", "[policy]\n[policy.docker]\nx = 1\n",
			[]problem{{2, "policy.docker", `unknown table [policy.docker]`}}},
		{"array of tables", "[[podman]]\nimage = \"x\"\n[[podman]]\n",
			[]problem{{1, "podman", `unknown array of tables [[podman]]`}}},
		{"dotted", "policy.foo.x = 1\npolicy.foo.y = 2\n",
			[]problem{{1, "policy.foo", `unknown key "foo" in [policy]`}}},
		{"in dirs", "[[worktrees]]\nrepo = \"/r\"\n[[dirs]]\nroot = \"/d\"\n" + strings.Repeat("\n", 35) + "workspaces = [\"w\"]\nws = 1\n",
			[]problem{{41, "dirs[0].ws", `unknown key "ws" in dirs[0]`}}},
		{"in inline table", "dirs = [{ root = \"/d\" },\n  { root = \"/e\", hme = \"h\" }]\n",
			[]problem{{2, "dirs[1].hme", `unknown key "hme" in dirs[1]; did you mean "home"?`}}},
		{"quoted dotted name", "\"policy.disk_high\" = 0.5\n",
			[]problem{{1, `"policy.disk_high"`, `unknown key "policy.disk_high" at top level`}}},
		{"archive s3", "[archive.s3]\nendpoint = \"http://127.0.0.1:7070\"\nbuckt = \"b\"\n",
			[]problem{{3, "archive.s3.buckt", `unknown key "buckt" in [archive.s3]; did you mean "bucket"?`}}},
		{"archive s3 without bucket", "[archive.s3]\nendpoint = \"ftp://x\"\n",
			[]problem{{1, "archive.s3.bucket", `required: the bucket archives go to`}, {2, "archive.s3.endpoint", `"ftp://x": want http://, https:// or host:port`}}},
		{"in server", "[server]\nlisten = \":8080\"\nlisen = \"x\"\n",
			[]problem{{3, "server.lisen", `unknown key "lisen" in [server]; did you mean "listen"?`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, path, err := loadDoc(t, tt.doc)
			checkProblems(t, err, path, tt.want...)
			if tt.want == nil && c == nil {
				t.Fatal("no config")
			}
		})
	}
}

func TestUnknownKeyMessage(t *testing.T) {
	testEnv(t)
	doc := "[policy]\n" + strings.Repeat("\n", 10) + "dsik_high = 0.85\n"
	_, path, err := loadDoc(t, doc)
	want := fmt.Sprintf(`config %s:12: unknown key "dsik_high" in [policy]; did you mean "disk_high"?`, path)
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestTypeErrors(t *testing.T) {
	testEnv(t)
	const (
		wantDuration = `want a duration such as "14d", "1d12h", "90m" or "off", `
		wantFraction = `want a fraction such as 0.85, a percentage such as "85%", or "off", `
	)
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"integer duration", "[policy]\nretention = 14\n",
			[]problem{{2, "policy.retention", wantDuration + "got the integer 14"}}},
		{"bool duration", "[[worktrees]]\nroot = \"/w\"\ngrace = true\n",
			[]problem{{3, "worktrees[0].grace", wantDuration + "got the boolean true"}}},
		{"float duration", "[policy]\nidle_suspend = 1.5\n",
			[]problem{{2, "policy.idle_suspend", wantDuration + "got the number 1.5"}}},
		{"bool fraction", "[policy]\ndisk_high = true\n",
			[]problem{{2, "policy.disk_high", wantFraction + "got the boolean true"}}},
		{"integer fraction", "[policy]\ndisk_high = 85\n",
			[]problem{{2, "policy.disk_high", wantFraction + "got the integer 85"}}},
		{"integer path", "[ledger]\npath = 1\n",
			[]problem{{2, "ledger.path", "want a string, got the integer 1"}}},
		{"array path", "[[dirs]]\nroot = [\"/a\"]\n",
			[]problem{{2, "dirs[0].root", "want a string, got an array"}}},
		{"string for list", "[[dirs]]\nroot = \"/a\"\nworkspaces = \"w\"\n",
			[]problem{{3, "dirs[0].workspaces", `want an array of strings, got the string "w"`}}},
		{"list element", "[policy]\ncache_dirs = [\n  \".cache\",\n  1,\n]\n",
			[]problem{{4, "policy.cache_dirs[1]", "want a string, got the integer 1"}}},
		{"date", "[policy]\nretention = 2025-01-01\n",
			[]problem{{2, "policy.retention", wantDuration + "got the date/time 2025-01-01"}}},
		{"table for value", "[policy]\n[policy.retention]\n",
			[]problem{{2, "policy.retention", `want ` + wantDuration[5:len(wantDuration)-2] + `, got a table`}}},
		{"value for table", "policy = \"strict\"\n",
			[]problem{{1, "policy", `want a table, got the string "strict"`}}},
		{"array of tables for table", "[[policy]]\nretention = \"1d\"\n",
			[]problem{{1, "policy", "is a single table: write [policy], not [[policy]]"}}},
		{"table for array of tables", "[worktrees]\nrepo = \"/r\"\n",
			[]problem{{1, "worktrees", "is an array of tables: write [[worktrees]] for each entry"}}},
		{"value for array of tables", "dirs = \"/d\"\n",
			[]problem{{1, "dirs", `want an array of tables, got the string "/d"`}}},
		{"array element not a table", "worktrees = [{ repo = \"/r\" }, \"/s\"]\n",
			[]problem{{1, "worktrees[1]", `want a table, got the string "/s"`}}},
		{"index a table", "policy = [{ retention = \"1d\" }]\n",
			[]problem{{1, "policy", "want a table, got an array"}}},
		{"all at once", "foo = 1\n[policy]\nretention = 14\ndisk_low = \"x\"\n[[worktrees]]\nrepo = 3\nbar = 2\n",
			[]problem{
				{1, "foo", `unknown key "foo" at top level`},
				{3, "policy.retention", wantDuration + "got the integer 14"},
				{4, "policy.disk_low", `"x" is not a fraction: write e.g. 0.85 or "85%", or "off"`},
				{6, "worktrees[0].repo", "want a string, got the integer 3"},
				{7, "worktrees[0].bar", `unknown key "bar" in worktrees[0]`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tt.doc)
			checkProblems(t, err, path, tt.want...)
		})
	}
}

func TestSyntaxErrors(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name      string
		doc       string
		line, col int
		msg       string
	}{
		{"missing value", "[policy]\nretention = \n", 2, 13, "unexpected character U+000A at start of value"},
		{"unterminated string", "[policy]\nretention = \"1d\n", 2, 16, "basic strings cannot have new lines"},
		{"bad header", "[policy\nretention = \"1d\"\n", 1, 0, ""},
		{"bare word", "[policy]\n\ngrace = off\n", 3, 9, ""},
		{"duplicate key", "[policy]\nretention = \"1d\"\nretention = \"2d\"\n", 3, 1, "key retention is already defined"},
		{"duplicate table", "[policy]\n[archive]\n[policy]\n", 3, 2, "table policy already exists"},
		{"end of file", "[[worktrees]]\nrepo = ", 2, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tt.doc)
			got := problems(t, err)
			if len(got) != 1 {
				t.Fatalf("got %v; want one problem", err)
			}
			e := got[0]
			if e.File != path || e.Line != tt.line || (tt.col > 0 && e.Column != tt.col) || e.Column == 0 ||
				(tt.msg != "" && e.Msg != tt.msg) || e.Msg == "" {
				t.Errorf("got %s:%d:%d %q; want line %d column %d %q", e.File, e.Line, e.Column, e.Msg, tt.line, tt.col, tt.msg)
			}
			prefix := fmt.Sprintf("config %s:%d:%d: ", path, e.Line, e.Column)
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Error() = %q; want prefix %q", err, prefix)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	testEnv(t)
	missing := filepath.Join(t.TempDir(), "missing.toml")
	_, err := Load(missing)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, config.ErrInvalid) {
		t.Errorf("missing file: got %v; want fs.ErrNotExist, not config.ErrInvalid", err)
	}
	if !strings.HasPrefix(fmt.Sprint(err), "load config: ") {
		t.Errorf("missing file: got %q", err)
	}

	big := writeConfig(t, "# "+strings.Repeat("x", 1<<20)+"\n")
	_, err = Load(big)
	checkProblems(t, err, big, problem{0, "", "larger than 1048576 bytes"})

	empty := writeConfig(t, "")
	c, err := Load(empty)
	if err != nil || c.Ledger.Path != testState+"/ledger.db" || c.Archive.Dir != testState+"/archives" ||
		len(c.Sources) != 0 {
		t.Errorf("empty file: got %+v, %v", c, err)
	}
}

func TestExampleIsComplete(t *testing.T) {
	// Every key the schema knows appears in the example (every kind's
	// among them); policy keys at least in [policy].
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	written, err := config.KeysOf(data, ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range written {
		seen[k] = true
	}
	// The keys every source has: in one source table at least.
	common := map[string]bool{}
	for _, k := range written {
		if _, leaf, ok := strings.Cut(k, "[]."); ok && (leaf == "name" || leaf == "list_timeout") {
			common[leaf] = true
		}
	}
	for _, key := range config.Keys(ConfigKinds()) {
		_, leaf, _ := strings.Cut(key, "[].")
		if !seen[key] && !(config.IsTables(ConfigKinds(), key) && seen[key+"[]"]) && !(leaf != "" && seen["policy."+leaf]) && !common[leaf] {
			t.Errorf("%s lacks %s", example, key)
		}
	}
	for _, leaf := range []string{"name", "list_timeout"} {
		if !common[leaf] {
			t.Errorf("%s shows %s in no source table", example, leaf)
		}
	}
}
