package sources

import (
	"errors"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/policy"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiskWatermarks(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name     string
		doc      string
		want     []problem
		high     float64 // effective global policy, when valid
		low      float64
		srcHigh  float64 // effective policy of the first source, if any
		srcLow   float64
		noSource bool
	}{
		{name: "off by default", doc: "", noSource: true},
		{name: "percent", doc: "[policy]\ndisk_high = \"85%\"\n", high: 0.85, low: 0.80, noSource: true},
		{name: "percent string low", doc: "[policy]\ndisk_high = 0.9\ndisk_low = \"72.5%\"\n", high: 0.9, low: 0.725, noSource: true},
		{name: "small high", doc: "[policy]\ndisk_high = 0.05\n", high: 0.05, low: 0.025, noSource: true},
		{name: "float string", doc: "[policy]\ndisk_high = \"0.5\"\n", high: 0.5, low: 0.45, noSource: true},
		{name: "low equal high", doc: "[policy]\ndisk_high = 0.8\ndisk_low = 0.8\n",
			want: []problem{{3, "policy.disk_low", "disk_low 0.8 must be below disk_high 0.8"}}},
		{name: "low above high", doc: "[policy]\ndisk_low = \"90%\"\ndisk_high = \"85%\"\n",
			want: []problem{{2, "policy.disk_low", "disk_low 0.9 must be below disk_high 0.85"}}},
		{name: "high zero", doc: "[policy]\ndisk_high = 0.0\n",
			want: []problem{{2, "policy.disk_high", `0.0 is not between 0 and 1: to turn the watermark off write "off"`}}},
		{name: "high integer zero", doc: "[policy]\ndisk_high = 0\n",
			want: []problem{{2, "policy.disk_high", `want a fraction such as 0.85, a percentage such as "85%", or "off", got the integer 0`}}},
		{name: "high one", doc: "[policy]\ndisk_high = 1.0\n",
			want: []problem{{2, "policy.disk_high", `1.0 is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
		{name: "high above one", doc: "[policy]\ndisk_high = 1.5\n",
			want: []problem{{2, "policy.disk_high", `1.5 is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
		{name: "high negative", doc: "[policy]\ndisk_high = -0.1\n",
			want: []problem{{2, "policy.disk_high", `-0.1 is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
		{name: "high nan", doc: "[policy]\ndisk_high = nan\n",
			want: []problem{{2, "policy.disk_high", `nan is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
		{name: "high 100%", doc: "[policy]\ndisk_high = \"100%\"\n",
			want: []problem{{2, "policy.disk_high", `"100%" is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
		{name: "high 0%", doc: "[policy]\ndisk_high = \"0%\"\n",
			want: []problem{{2, "policy.disk_high", `"0%" is not between 0 and 1: to turn the watermark off write "off"`}}},
		{name: "low without high", doc: "[policy]\ndisk_low = 0.5\n",
			want: []problem{{2, "policy.disk_low", "is set, but disk_high is not"}}},
		{name: "low off", doc: "[policy]\ndisk_high = 0.9\ndisk_low = \"off\"\n",
			want: []problem{{3, "policy.disk_low", `"off" is not allowed: leave disk_low out for the default, or set disk_high = "off"`}}},
		{name: "source low above global high",
			doc:  "[policy]\ndisk_high = 0.85\n[[dirs]]\nroot = \"/d\"\ndisk_low = 0.9\n",
			want: []problem{{5, "dirs[0].disk_low", "disk_low 0.9 must be below disk_high 0.85 (from [policy])"}}},
		{name: "source low without any high",
			doc:  "[[worktrees]]\nroot = \"/w\"\ndisk_low = 0.5\n",
			want: []problem{{3, "worktrees[0].disk_low", "is set, but disk_high is not"}}},
		{name: "source high below global low gets its own low",
			doc:  "[policy]\ndisk_high = 0.9\ndisk_low = 0.8\n[[dirs]]\nroot = \"/d\"\ndisk_high = 0.6\n",
			high: 0.9, low: 0.8, srcHigh: 0.6, srcLow: 0.55},
		{name: "source low only",
			doc:  "[policy]\ndisk_high = 0.9\n[[dirs]]\nroot = \"/d\"\ndisk_low = 0.6\n",
			high: 0.9, low: 0.85, srcHigh: 0.9, srcLow: 0.6},
		{name: "source turns budget off",
			doc:  "[policy]\ndisk_high = 0.9\ndisk_low = 0.7\n[[dirs]]\nroot = \"/d\"\ndisk_high = \"off\"\n",
			high: 0.9, low: 0.7},
		{name: "source sets both",
			doc:     "[[dirs]]\nroot = \"/d\"\ndisk_high = \"95%\"\ndisk_low = \"90%\"\n",
			srcHigh: 0.95, srcLow: 0.9},
		{name: "source both wrong way",
			doc:  "[[dirs]]\nroot = \"/d\"\ndisk_high = 0.7\ndisk_low = 0.75\n",
			want: []problem{{4, "dirs[0].disk_low", "disk_low 0.75 must be below disk_high 0.7"}}},
		{name: "source out of range",
			doc:  "[[worktrees]]\nrepo = \"/r\"\ndisk_high = \"101%\"\n",
			want: []problem{{3, "worktrees[0].disk_high", `"101%" is not between 0 and 1 (exclusive): write e.g. 0.85 or "85%"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, path, err := loadDoc(t, tt.doc)
			if tt.want != nil {
				checkProblems(t, err, path, tt.want...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := c.PolicyFor(nil); p.DiskHigh != tt.high || p.DiskLow != tt.low {
				t.Errorf("global: high %v low %v; want %v %v", p.DiskHigh, p.DiskLow, tt.high, tt.low)
			}
			if tt.noSource {
				return
			}
			if p := c.PolicyFor(tables[*DirsTable](c)[0]); p.DiskHigh != tt.srcHigh || p.DiskLow != tt.srcLow {
				t.Errorf("source: high %v low %v; want %v %v", p.DiskHigh, p.DiskLow, tt.srcHigh, tt.srcLow)
			}
		})
	}
}

func TestDurationKeys(t *testing.T) {
	testEnv(t)
	for _, key := range []string{"retention", "grace", "idle_suspend", "max_lifetime"} {
		for _, tt := range []struct {
			value string
			want  time.Duration
			err   string
		}{
			{value: `"14d"`, want: days(14)},
			{value: `"1d12h"`, want: 36 * time.Hour},
			{value: `"90m"`, want: 90 * time.Minute},
			{value: `"30s"`, want: 30 * time.Second},
			{value: `"0"`, want: 0},
			{value: `"off"`, want: 0},
			{value: `'2w'`, want: days(14)},
			{value: `""`, err: `empty duration: write "off" or leave the key out`},
			{value: `"-1h"`, err: `"-1h": negative durations are not allowed`},
			{value: `"14"`, err: `"14": the number has no unit: write e.g. "14d", "14h" or "14m"`},
			{value: `"soon"`, err: `"soon" is not a duration: write a number and a unit, e.g. "14d", "1d12h" or "90m"`},
			{value: `"1d 12h"`, err: `"1d 12h": unknown unit "d " (use w, d, h, m, s, ms, us or ns)`},
			{value: `0`, err: `want a duration such as "14d", "1d12h", "90m" or "off", got the integer 0`},
		} {
			doc := "[[dirs]]\nroot = \"/d\"\n\n" + key + " = " + tt.value + "\n"
			c, path, err := loadDoc(t, doc)
			if tt.err != "" {
				checkProblems(t, err, path, problem{4, "dirs[0]." + key, tt.err})
				continue
			}
			if err != nil {
				t.Errorf("%s = %s: %v", key, tt.value, err)
				continue
			}
			p := c.PolicyFor(tables[*DirsTable](c)[0])
			got := map[string]time.Duration{
				"retention": p.Retention, "grace": p.Grace, "idle_suspend": p.IdleSuspend, "max_lifetime": p.MaxLifetime,
			}
			if got[key] != tt.want {
				t.Errorf("%s = %s: got %v; want %v", key, tt.value, got[key], tt.want)
			}
		}
	}
}

func TestSourceRules(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"repo and root", "[[worktrees]]\nrepo = \"/r\"\nroot = \"/w\"\n",
			[]problem{{3, "worktrees[0].root", `set repo or root, not both (repo is "/r")`}}},
		{"neither", "[[worktrees]]\nrepo = \"/r\"\n[[worktrees]]\nretention = \"1d\"\n",
			[]problem{{3, "worktrees[1]", "set repo (a repository's worktrees) or root (every worktree under a folder)"}}},
		{"empty inline", "worktrees = [{}]\n",
			[]problem{{1, "worktrees[0]", "set repo (a repository's worktrees) or root (every worktree under a folder)"}}},
		{"relative root", "[[worktrees]]\nroot = \"srv/worktrees\"\n",
			[]problem{{2, "worktrees[0].root", `"srv/worktrees" is not an absolute path`}}},
		{"relative repo", "[[worktrees]]\nrepo = \"./project\"\n",
			[]problem{{2, "worktrees[0].repo", `"./project" is not an absolute path`}}},
		{"relative dirs root", "[[dirs]]\nroot = \"runs\"\n",
			[]problem{{2, "dirs[0].root", `"runs" is not an absolute path`}}},
		{"dirs without root", "[[dirs]]\nhome = \"h\"\n",
			[]problem{{1, "dirs[0]", "root is required"}}},
		{"dirs root slash", "[[dirs]]\nroot = \"/\"\n",
			[]problem{{2, "dirs[0].root", `refusing to manage "/"`}}},
		{"worktrees root slash", "[[worktrees]]\nroot = \"//\"\n",
			[]problem{{2, "worktrees[0].root", `refusing to manage "/"`}}},
		{"dotdot in workspaces", "[[dirs]]\nroot = \"/d\"\nworkspaces = [\"ws\", \"../other\", \"a/../../b\"]\n",
			[]problem{
				{3, "dirs[0].workspaces[1]", `"../other" must not contain ".."`},
				{3, "dirs[0].workspaces[2]", `"a/../../b" must not contain ".."`},
			}},
		{"bad subpaths", "[[dirs]]\nroot = \"/d\"\nhome = \"/home/x\"\nworkspaces = [\n\"a/\",\n\"~/w\",\n\"\",\n\"a//b\",\n]\n",
			[]problem{
				{3, "dirs[0].home", `"/home/x" must be relative to the runtime folder`},
				{5, "dirs[0].workspaces[0]", `"a/" is not clean: write "a"`},
				{6, "dirs[0].workspaces[1]", `"~/w": write the path relative to the runtime folder, without ~`},
				{7, "dirs[0].workspaces[2]", "empty path"},
				{8, "dirs[0].workspaces[3]", `"a//b" is not clean: write "a/b"`},
			}},
		{"bad cache dirs", "[policy]\ncache_dirs = [\".\", \"..\", \"/tmp\", \"~/.cache\", \"./x\"]\n",
			[]problem{
				{2, "policy.cache_dirs[0]", `"." is the whole home: name a folder inside it`},
				{2, "policy.cache_dirs[1]", `".." must not contain ".."`},
				{2, "policy.cache_dirs[2]", `"/tmp" must be relative to the runtime's home`},
				{2, "policy.cache_dirs[3]", `"~/.cache": write the path relative to the runtime's home, without ~`},
				{2, "policy.cache_dirs[4]", `"./x" is not clean: write "x"`},
			}},
		{"cache dirs in source", "[[worktrees]]\nroot = \"/w\"\ncache_dirs = [\"../x\"]\n",
			[]problem{{3, "worktrees[0].cache_dirs[0]", `"../x" must not contain ".."`}}},
		{"relative ledger", "[ledger]\npath = \"ledger.db\"\n[archive]\ndir = \"archives\"\n",
			[]problem{
				{2, "ledger.path", `"ledger.db" is not an absolute path`},
				{4, "archive.dir", `"archives" is not an absolute path`},
			}},
		{"nested dirs roots", "[[dirs]]\nroot = \"/srv/runs\"\n[[dirs]]\nroot = \"/srv/runs/team\"\n",
			[]problem{{4, "dirs[1].root", "/srv/runs/team is inside dirs[0].root (/srv/runs): a folder must belong to one source"}}},
		{"containing root", "[[worktrees]]\nroot = \"/srv/agents/wt\"\n[[dirs]]\nroot = \"/srv/agents\"\n",
			[]problem{{4, "dirs[0].root", "/srv/agents contains worktrees[0].root (/srv/agents/wt): a folder must belong to one source"}}},
		{"same root", "[[worktrees]]\nroot = \"/srv/x\"\n[[dirs]]\nroot = \"/srv/x/\"\n",
			[]problem{{4, "dirs[0].root", "/srv/x is also worktrees[0].root: a folder must belong to one source"}}},
		{"sibling roots", "[[dirs]]\nroot = \"/srv/run\"\n[[dirs]]\nroot = \"/srv/runs\"\n", nil},
		{"repo in dirs root", "[[worktrees]]\nrepo = \"/srv/runs/project\"\n[[dirs]]\nroot = \"/srv/runs\"\n",
			[]problem{{4, "dirs[0].root", "/srv/runs/project is inside dirs[0].root (/srv/runs): it would be deleted as a runtime"}}},
		{"repo in worktrees root", "[[worktrees]]\nroot = \"/src\"\n[[worktrees]]\nrepo = \"/src/project\"\n[[worktrees]]\nroot = \"/src2/project/.worktrees\"\n[[worktrees]]\nrepo = \"/src2/project\"\n", nil},
		{"same repo twice", "[[worktrees]]\nrepo = \"/p\"\n[[worktrees]]\nrepo = \"/p\"\nretention = \"1d\"\n",
			[]problem{{4, "worktrees[1].repo", "/p repeats worktrees[0].repo"}}},
		{"ledger in root", "[ledger]\npath = \"/srv/runs/ledger.db\"\n[archive]\ndir = \"/srv/wt\"\n[[dirs]]\nroot = \"/srv/runs\"\n[[worktrees]]\nroot = \"/srv/wt\"\n",
			[]problem{
				{2, "ledger.path", "/srv/runs/ledger.db is inside dirs[0].root (/srv/runs), which this program deletes from"},
				{4, "archive.dir", "/srv/wt is inside worktrees[0].root (/srv/wt), which this program deletes from"},
			}},
		{"ledger in repo", "[ledger]\npath = \"/p/.reclaimer/ledger.db\"\n[[worktrees]]\nrepo = \"/p\"\n", nil},
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

func TestHomeExpansion(t *testing.T) {
	testEnv(t)
	const doc = `
[ledger]
path = "~/state/ledger.db"
[archive]
dir = "~"
[[worktrees]]
repo = "~/src/project/"
[[worktrees]]
root = "/srv//wt/./x/.."
[[dirs]]
root = "~/runs"
home = "~"
`
	// home = "~" names a folder called "~" in each runtime: refused.
	_, path, err := loadDoc(t, doc)
	checkProblems(t, err, path, problem{12, "dirs[0].home", `"~": write the path relative to the runtime folder, without ~`})

	c := mustLoad(t, strings.Replace(doc, "home = \"~\"\n", "", 1))
	wts, dirs := tables[*WorktreesTable](c), tables[*DirsTable](c)
	if c.Ledger.Path != "/home/tester/state/ledger.db" || c.Archive.Dir != "/home/tester" ||
		wts[0].Repo != "/home/tester/src/project" || wts[1].Root != "/srv/wt" ||
		dirs[0].Root != "/home/tester/runs" {
		t.Errorf("got ledger %q archive %q repo %q root %q dirs %q",
			c.Ledger.Path, c.Archive.Dir, wts[0].Repo, wts[1].Root, dirs[0].Root)
	}

	_, path, err = loadDoc(t, "[[dirs]]\nroot = \"~bob/runs\"\n")
	checkProblems(t, err, path, problem{2, "dirs[0].root", `"~bob/runs": ~user is not supported: write the absolute path`})

	t.Setenv("HOME", "")
	_, path, err = loadDoc(t, "[ledger]\npath = \"/l.db\"\n[archive]\ndir = \"/a\"\n[[dirs]]\nroot = \"~/runs\"\n")
	checkProblems(t, err, path, problem{6, "dirs[0].root", `"~/runs": cannot expand ~ because $HOME is not set`})
}

func TestStateDir(t *testing.T) {
	for _, tt := range []struct {
		name      string
		uid       int
		xdg, home string
		want      string
	}{
		{"root", 0, "/xdg", "/root", "/var/lib/reclaimer"},
		{"xdg", 1000, "/xdg", "/home/u", "/xdg/reclaimer"},
		{"home", 1000, "", "/home/u", "/home/u/.local/state/reclaimer"},
		{"relative xdg ignored", 1000, "xdg", "/home/u", "/home/u/.local/state/reclaimer"},
		{"nothing", 1000, "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setEUID(t, tt.uid)
			t.Setenv("XDG_STATE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			got, err := config.StateDir()
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("config.StateDir() = %q, %v; want %q", got, err, tt.want)
			}
			c, path, err := loadDoc(t, "[policy]\n")
			if tt.want == "" {
				checkProblems(t, err, path,
					problem{0, "ledger.path", "no default ledger file: neither $XDG_STATE_HOME nor $HOME is set; set ledger.path"},
					problem{0, "archive.dir", "no default archive folder: neither $XDG_STATE_HOME nor $HOME is set; set archive.dir"})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Ledger.Path != tt.want+"/ledger.db" || c.Archive.Dir != tt.want+"/archives" {
				t.Errorf("ledger %q, archive %q; want them in %q", c.Ledger.Path, c.Archive.Dir, tt.want)
			}
			d := config.Default()
			if d.Ledger.Path != tt.want+"/ledger.db" || d.Archive.Dir != tt.want+"/archives" {
				t.Errorf("Default: ledger %q, archive %q; want them in %q", d.Ledger.Path, d.Archive.Dir, tt.want)
			}
		})
	}
}

func TestDefaultAndAdd(t *testing.T) {
	testEnv(t)
	dir := t.TempDir()
	t.Chdir(dir)

	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("config.Default().Validate() = %v", err)
	}
	want := policy.Settings{CacheDirs: []string{".cache", ".npm"}, Grace: 24 * time.Hour}
	if p := c.PolicyFor(nil); !equalPolicy(p, want) {
		t.Errorf("default policy %+v; want %+v", p, want)
	}

	if err := AdHoc(c, []string{"project", "~/wt"}, []string{"/srv/runs/"}); err != nil {
		t.Fatal(err)
	}
	wts, dirs := tables[*WorktreesTable](c), tables[*DirsTable](c)
	if wts[0].Repo != filepath.Join(dir, "project") || wts[1].Repo != "/home/tester/wt" || dirs[0].Root != "/srv/runs" {
		t.Errorf("added %+v %+v", wts, dirs)
	}
	if got := c.Sources[0].Name(); got != "worktrees:"+filepath.Join(dir, "project") {
		t.Errorf("an ad-hoc source is named %q, not as a file's table would be", got)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	for _, w := range wts {
		if p := c.PolicyFor(w); !equalPolicy(p, want) {
			t.Errorf("PolicyFor(%+v) = %+v; want %+v", w, p, want)
		}
	}

	if err := AdHoc(c, nil, []string{""}); err == nil || err.Error() != "--dir: empty path" {
		t.Errorf("AdHoc dir \"\" = %v", err)
	}
	if err := AdHoc(c, []string{"~bob/x"}, nil); err == nil || !strings.Contains(err.Error(), "~user is not supported") {
		t.Errorf("AdHoc repo ~bob = %v", err)
	}

	// Problems in a Config built in code name no file and no line.
	if err := AdHoc(c, nil, []string{"/srv/runs/a"}); err != nil {
		t.Fatal(err)
	}
	tables[*DirsTable](c)[1].Retention = ptr(config.Duration(-time.Hour))
	checkProblems(t, c.Validate(), "",
		problem{0, "dirs[1].retention", "-1h0m0s: negative durations are not allowed"},
		problem{0, "dirs[1].root", "/srv/runs/a is inside dirs[0].root (/srv/runs): a folder must belong to one source"})
	if got := c.Validate().Error(); !strings.HasPrefix(got, "config: dirs[1].retention: ") {
		t.Errorf("Error() = %q", got)
	}
}

func equalPolicy(a, b policy.Settings) bool {
	return strings.Join(a.CacheDirs, ",") == strings.Join(b.CacheDirs, ",") && (a.CacheDirs != nil) == (b.CacheDirs != nil) &&
		a.DiskHigh == b.DiskHigh && a.DiskLow == b.DiskLow && a.Retention == b.Retention && a.Grace == b.Grace &&
		a.IdleSuspend == b.IdleSuspend && a.MaxLifetime == b.MaxLifetime
}

func TestValidateKeepsLinesAfterChange(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, "[policy]\nretention = \"1d\"\n\n[[dirs]]\nroot = \"/d\"\n")
	tables[*DirsTable](c)[0].Workspaces = []string{"../x"}
	c.Policy.Grace = ptr(config.Duration(-1))
	var first *config.Error
	if err := c.Validate(); !errors.As(err, &first) {
		t.Fatalf("Validate: %v", err)
	}
	checkProblems(t, c.Validate(), first.File,
		problem{1, "policy.grace", "-1ns: negative durations are not allowed"},
		problem{4, "dirs[0].workspaces[0]", `"../x" must not contain ".."`})
	if _, err := os.Stat(first.File); err != nil {
		t.Errorf("name %q is not the loaded file: %v", first.File, err)
	}
}
