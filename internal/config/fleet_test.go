package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFleetChecks(t *testing.T) {
	testEnv(t)
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"tcp url", "[ledger]\nurl = \"postgres://reclaimer@db:5432/reclaimer?sslmode=disable\"\n", nil},
		{"socket url", "[ledger]\nurl = \"postgres:///reclaimer?host=/run/postgresql\"\n", nil},
		{"name and lease", "[server]\nname = \"host-a\"\nleader_lease = \"30s\"\n", nil},
		{"scheme", "[ledger]\nurl = \"mysql://u:secret@db/x\"\n",
			[]problem{{2, "ledger.url", `scheme "mysql": want "postgres://host:5432/db?user=NAME" or "postgres:///db?host=/run/postgresql"`}}},
		{"no host", "[ledger]\nurl = \"postgres:///reclaimer\"\n",
			[]problem{{2, "ledger.url", `no host: give one ("postgres://host/db") or a socket folder ("postgres:///db?host=/run/postgresql")`}}},
		{"unparsable", "[ledger]\nurl = \"postgres://u:sec ret@[db/x\"\n",
			[]problem{{2, "ledger.url", `not a URL: want "postgres://host:5432/db?user=NAME" or "postgres:///db?host=/run/postgresql"`}}},
		{"two passwords", "[ledger]\nurl = \"postgres://u:secret@db/x\"\npassword_file = \"/etc/reclaimer/pg\"\n",
			[]problem{{3, "ledger.password_file", "the URL has a password already: give it in one place"}}},
		{"password file alone", "[ledger]\npassword_file = \"/etc/reclaimer/pg\"\n",
			[]problem{{2, "ledger.password_file", "only with ledger.url (the PostgreSQL ledger)"}}},
		{"relative password file", "[ledger]\nurl = \"postgres://u@db/x\"\npassword_file = \"pg\"\n",
			[]problem{{3, "ledger.password_file", `"pg" is not an absolute path`}}},
		{"bad name", "[server]\nname = \"host a/b\"\n",
			[]problem{{2, "server.name", `"host a/b": want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)`}}},
		{"short lease", "[server]\nleader_lease = \"500ms\"\n",
			[]problem{{2, "server.leader_lease", "500ms: at least 1s (renewals go every third of it)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadDoc(t, tt.doc)
			checkProblems(t, err, path, tt.want...)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("a password is in the message: %v", err)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("not a configuration error: %v", err)
			}
		})
	}
}

func TestFleetDefaults(t *testing.T) {
	testEnv(t)
	old := hostname
	hostname = func() (string, error) { return "web-3.example.com", nil }
	t.Cleanup(func() { hostname = old })
	c, _, err := loadDoc(t, "[ledger]\nurl = \"postgres://u@db/x\"\n")
	if err != nil {
		t.Fatal(err)
	}
	s := c.ServerSettings()
	if !c.Fleet() || s.Name != "web-3" || s.LeaderLease != DefaultLeaderLease {
		t.Errorf("fleet %v, name %q, lease %s; want true, web-3, %s", c.Fleet(), s.Name, s.LeaderLease, DefaultLeaderLease)
	}
	c, _, err = loadDoc(t, "[server]\nname = \"a\"\nleader_lease = \"4s\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.ServerSettings(); c.Fleet() || s.Name != "a" || s.LeaderLease != 4*time.Second {
		t.Errorf("got %+v", s)
	}
}

func TestLedgerPassword(t *testing.T) {
	testEnv(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pg")
	if err := os.WriteFile(pw, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := loadDoc(t, "[ledger]\nurl = \"postgres://u@db/x\"\npassword_file = \""+pw+"\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.LedgerPassword(); err != nil || got != "s3cret" {
		t.Errorf("LedgerPassword = %q, %v", got, err)
	}
	c.Ledger.PasswordFile = filepath.Join(dir, "missing")
	if _, err := c.LedgerPassword(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a missing file: %v, want a configuration error", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@db:5432/x?sslmode=disable": "postgres://u:xxxxx@db:5432/x?sslmode=disable",
		"postgres://u@db/x?password=s3cret":             "postgres://u@db/x?password=xxxxx",
		"postgres:///x?host=/run/postgresql":            "postgres:///x?host=/run/postgresql",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
