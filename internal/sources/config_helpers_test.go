package sources

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/config"
)

// testEnv gives the test a known $HOME, no $XDG_STATE_HOME and a non-root
// user, so that defaults are predictable: the state folder is
// /home/tester/.local/state/reclaimer.
func testEnv(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", "/home/tester")
	t.Setenv("XDG_STATE_HOME", "")
	setEUID(t, 1000)
}

func setEUID(t *testing.T, uid int) {
	t.Helper()
	t.Cleanup(config.SetEUIDForTest(uid))
}

const testState = "/home/tester/.local/state/reclaimer"

// writeConfig writes doc to a file in a fresh temporary folder.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reclaimer.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadDoc writes doc to a real file and loads it.
func loadDoc(t *testing.T, doc string) (*config.Config, string, error) {
	t.Helper()
	path := writeConfig(t, doc)
	c, err := Load(path)
	return c, path, err
}

// mustLoad loads doc and fails the test on error.
func mustLoad(t *testing.T, doc string) *config.Config {
	t.Helper()
	c, _, err := loadDoc(t, doc)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, doc)
	}
	return c
}

// problems flattens err into its *Errors, failing the test on anything
// else.
func problems(t *testing.T, err error) []*config.Error {
	t.Helper()
	if err != nil && !errors.Is(err, config.ErrInvalid) {
		t.Errorf("error %q does not match ErrInvalid", err)
	}
	errs, ok := config.Errors(err)
	if !ok {
		t.Fatalf("error %q holds more than *Errors", err)
	}
	return errs
}

// problem is the expected form of one *config.Error.
type problem struct {
	line int
	key  string
	msg  string
}

// checkProblems asserts that err holds exactly want, in order, all naming
// file.
func checkProblems(t *testing.T, err error, file string, want ...problem) {
	t.Helper()
	got := problems(t, err)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		g := got[i]
		if g.Line != w.line || g.Key != w.key || g.Msg != w.msg || g.File != file {
			t.Errorf("problem %d:\n got  %s:%d key %q msg %q\n want %s:%d key %q msg %q",
				i, g.File, g.Line, g.Key, g.Msg, file, w.line, w.key, w.msg)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// tables returns the tables of one kind, in file order: the typed view of
// cfg.Sources that the tests of each kind read.
func tables[T config.Table](c *config.Config) []T {
	var out []T
	for _, s := range c.Sources {
		if t, ok := s.Table.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// example is the documentation's complete example file, which every
// registered kind must appear in.
const example = "../../docs/example.toml"
