package ignored_test

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/ignored"
)

// TestIgnoredFolderShedOnlyWhenRebuildable: an ignored folder is shed only
// when it is a known dependency or build output, or holds nothing a user
// would want back; a .git at any depth keeps any folder. Secrets, cloud
// credentials, Terraform state and a nested clone four levels down are
// kept and reported with why.
func TestIgnoredFolderShedOnlyWhenRebuildable(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	initRepo(t, ws, map[string]string{".gitignore": "node_modules/\nsecrets/\n.aws/\nterraform.tfstate.d/\nvendor-src/\nlogs/\ntmp/\ndist/\n"},
		"node_modules/lib/test/fixtures/server.pem", // a known name: test keys in packages do not keep it
		"node_modules/lib/index.js",
		"secrets/.env",
		".aws/credentials",
		"terraform.tfstate.d/prod/terraform.tfstate",
		"logs/app.log",
		"tmp/keys/id_ed25519",
		"dist/app.js",
	)
	initRepo(t, filepath.Join(ws, "vendor-src", "a", "b", "c", "clone"), nil, "work.txt")
	initRepo(t, filepath.Join(ws, "dist", "deep", "x", "y", "z", "clone"), nil, "f") // even a known name
	kept := map[string]string{}
	got, err := ignored.Select(ctx(t), gitcmd.Runner{}, ws, ignored.Options{Root: root,
		Kept: func(dir, why string) { kept[dir] = why }})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, dirs(ws, "logs", "node_modules"))
	var names []string
	for dir, why := range kept {
		names = append(names, filepath.Base(dir))
		if why == "" {
			t.Errorf("%s kept without a reason", dir)
		}
	}
	sort.Strings(names)
	if strings.Join(names, " ") != ".aws dist secrets terraform.tfstate.d tmp vendor-src" {
		t.Errorf("kept %v (%v)", names, kept)
	}
	if why := kept[filepath.Join(ws, "vendor-src")]; !strings.Contains(why, ".git") {
		t.Errorf("vendor-src kept for %q, want its clone named", why)
	}
	// The lists are the caller's to change.
	got, err = ignored.Select(ctx(t), gitcmd.Runner{}, ws, ignored.Options{Root: root, Rebuildable: []string{}, Keep: []string{"*.js"}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, dirs(ws, ".aws", "logs", "secrets", "terraform.tfstate.d", "tmp"))
}
