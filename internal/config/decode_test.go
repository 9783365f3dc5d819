package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// testTable is a source kind of this package's own tests ([[worktrees]]
// with one key): the real kinds live in package sources, which builds on
// this one.
type testTable struct {
	Repo string `toml:"repo"`
	SourceBase
}

func (t *testTable) Identity() string { return t.Repo }
func (t *testTable) Describe() string { return "repo = " + t.Repo }
func (t *testTable) Paths() []Path {
	return []Path{{Key: "repo", Value: &t.Repo, Role: PathRepo}}
}
func (t *testTable) Check(c *Check) {}

var testKinds = []Kind{{Table: "worktrees", New: func() Table { return &testTable{} }}}

// TestDecoderErrors checks the second line of defence: errors of go-toml's
// strict decoder, for documents the scanner let through, become *Errors
// naming the key and line.
func TestDecoderErrors(t *testing.T) {
	testEnv(t)
	doc := []byte("[policy]\nretention = \"1d\"\n\n[[worktrees]]\nrepo = \"/r\"\nretain = 1\n")
	s := newScanner(doc, "f.toml", testKinds)
	s.scan()
	s.errs, s.unknown = nil, map[string]bool{} // pretend the scanner missed the unknown key

	c := reflect.New(document(testKinds)).Interface()
	dec := toml.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	err := dec.Decode(c)
	var strict *toml.StrictMissingError
	if !errors.As(err, &strict) {
		t.Fatalf("go-toml: got %v; want a StrictMissingError", err)
	}
	s.convert(err)
	checkProblems(t, joinErrors(s.errs), "f.toml",
		problem{6, "worktrees[0].retain", `unknown key "retain" in worktrees[0]`})

	// A type error as go-toml reports it.
	doc = []byte("[policy]\n\ndisk_high = [1]\n")
	s = newScanner(doc, "f.toml", testKinds)
	s.scan()
	s.errs, s.unknown = nil, map[string]bool{}
	err = toml.Unmarshal(doc, c)
	s.convert(err)
	got := problems(t, joinErrors(s.errs))
	if len(got) != 1 || got[0].Line != 3 || got[0].Key != "policy.disk_high" || got[0].Column == 0 ||
		!strings.Contains(got[0].Msg, "cannot decode TOML") {
		t.Errorf("got %v", joinErrors(s.errs))
	}

	// Anything else keeps its message.
	s.errs = nil
	s.convert(errors.New("toml: something odd"))
	checkProblems(t, joinErrors(s.errs), "f.toml", problem{0, "", "something odd"})
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "/etc/r.toml", Line: 12, Key: "worktrees[1].retention", Msg: "bad"}, "config /etc/r.toml:12: worktrees[1].retention: bad"},
		{Error{File: "/etc/r.toml", Line: 2, Column: 13, Msg: "unexpected"}, "config /etc/r.toml:2:13: unexpected"},
		{Error{File: "/etc/r.toml", Key: "ledger.path", Msg: "bad"}, "config /etc/r.toml: ledger.path: bad"},
		{Error{Key: "dirs[0].root", Msg: "bad"}, "config: dirs[0].root: bad"},
		{Error{Line: 3, Key: "policy.x", Msg: `unknown key "x" in [policy]`, keyInMsg: true}, `config line 3: unknown key "x" in [policy]`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
		if !errors.Is(&tt.e, ErrInvalid) {
			t.Errorf("%q does not match ErrInvalid", tt.want)
		}
	}
}
