package rundir_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend/backendtest"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestConformance: run folders of one root; a hidden folder is outside the
// backend's scope.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Capabilities: []string{"Lister", "Deleter", "FileReclaimer", "Exporter", "Restorer"},
		Setup: func(t *testing.T) *backendtest.Provider {
			root := t.TempDir()
			exists := func(t *testing.T, id string) bool {
				_, err := os.Lstat(filepath.Join(root, id))
				return err == nil
			}
			return &backendtest.Provider{
				Backend: &rundir.Backend{Root: root, Home: "home", CacheDirs: []string{".cache"}},
				Make: func(t *testing.T, name string) string {
					testtree.Write(t, filepath.Join(root, name, "home", ".cache", "x"), "x")
					testtree.Write(t, filepath.Join(root, name, "task.json"), "{}")
					return name
				},
				MakeOutside: func(t *testing.T, name string) string {
					testtree.Write(t, filepath.Join(root, "."+name, "task.json"), "{}")
					return "." + name
				},
				Exists: exists,
				Vanish: func(t *testing.T, id string) {
					if err := os.RemoveAll(filepath.Join(root, id)); err != nil {
						t.Fatal(err)
					}
				},
			}
		},
	})
}
