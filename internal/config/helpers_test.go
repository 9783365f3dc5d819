package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	old := geteuid
	geteuid = func() int { return uid }
	t.Cleanup(func() { geteuid = old })
}

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
func loadDoc(t *testing.T, doc string) (*Config, string, error) {
	t.Helper()
	path := writeConfig(t, doc)
	c, err := Load(path, nil)
	return c, path, err
}

// problems flattens err into its *Errors, failing the test on anything
// else.
func problems(t *testing.T, err error) []*Error {
	t.Helper()
	if err != nil && !errors.Is(err, ErrInvalid) {
		t.Errorf("error %q does not match ErrInvalid", err)
	}
	errs, ok := Errors(err)
	if !ok {
		t.Fatalf("error %q holds more than *Errors", err)
	}
	return errs
}

// problem is the expected form of one *Error.
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

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }
