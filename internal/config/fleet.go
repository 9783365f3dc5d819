package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// A fleet: [ledger] url set, the ledger is PostgreSQL, shared by the
// replicas of many hosts (docs/fleet.md). Each replica is named ([server]
// name, default the host name); the local sources of its configuration
// are its own, and their names carry its name (sources.Build), so that two
// hosts with the same [[dirs]] root never share a runtime's key.

// replicaName is what a replica may be called: a host name's letters,
// short enough for a log line and a label.
var replicaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// hostname is replaced in tests.
var hostname = os.Hostname

// Fleet reports whether the ledger is PostgreSQL ([ledger] url).
func (c *Config) Fleet() bool { return c.Ledger.URL != "" }

// ReplicaName is [server] name, else the host name up to its first dot
// (empty when neither is known; Validate reports it for a fleet).
func (c *Config) ReplicaName() string {
	if c.Server.Name != "" {
		return c.Server.Name
	}
	h, err := hostname()
	if err != nil {
		return ""
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

// LedgerPassword is the password of [ledger] url's role from
// password_file, or "" when none is set (the URL's own, PGPASSWORD or
// ~/.pgpass then apply, libpq's rules). The error never holds the
// password.
func (c *Config) LedgerPassword() (string, error) {
	if c.Ledger.PasswordFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(c.Ledger.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("%w: ledger.password_file: %w", ErrInvalid, err)
	}
	pw := strings.TrimSpace(string(data))
	if pw == "" {
		return "", fmt.Errorf("%w: ledger.password_file %s is empty", ErrInvalid, c.Ledger.PasswordFile)
	}
	if fi, err := os.Stat(c.Ledger.PasswordFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return pw, fmt.Errorf("ledger.password_file %s can be read by others (mode %s); chmod 600 it", c.Ledger.PasswordFile, fi.Mode().Perm())
	}
	return pw, nil
}

// RedactedLedgerURL is [ledger] url with its password, if any, replaced
// by "xxxxx": what logs and messages show.
func (c *Config) RedactedLedgerURL() string { return RedactURL(c.Ledger.URL) }

// RedactURL hides the password of a postgres:// URL (and of one that
// does not parse, all of it).
func RedactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// fleet checks [ledger] url and password_file, [server] name and
// leader_lease. Messages never repeat the URL: it may hold a password.
func (v *validator) fleet() {
	l, s := v.c.Ledger, v.c.Server
	if l.URL != "" {
		if err := checkLedgerURL(l.URL); err != nil {
			v.add("ledger.url", "%v", err)
		} else if l.PasswordFile != "" && urlHasPassword(l.URL) {
			v.add("ledger.password_file", "the URL has a password already: give it in one place")
		}
	}
	if l.PasswordFile != "" {
		if l.URL == "" {
			v.add("ledger.password_file", "only with ledger.url (the PostgreSQL ledger)")
		}
		v.absPath("ledger.password_file", l.PasswordFile, "password file")
	}
	if s.Name != "" && !replicaName.MatchString(s.Name) {
		v.add("server.name", "%q: want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)", s.Name)
	} else if s.Name == "" && l.URL != "" && !replicaName.MatchString(v.c.ReplicaName()) {
		v.add("server.name", "the host name %q cannot name this replica: set server.name", v.c.ReplicaName())
	}
	if s.LeaderLease != nil && time.Duration(*s.LeaderLease) < MinLeaderLease {
		v.add("server.leader_lease", "%s: at least %s (renewals go every third of it)", time.Duration(*s.LeaderLease), MinLeaderLease)
	}
}

func checkLedgerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New(`not a URL: want "postgres://host:5432/db?user=NAME" or "postgres:///db?host=/run/postgresql"`)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf(`scheme %q: want "postgres://host:5432/db?user=NAME" or "postgres:///db?host=/run/postgresql"`, u.Scheme)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return errors.New(`no host: give one ("postgres://host/db") or a socket folder ("postgres:///db?host=/run/postgresql")`)
	}
	if h := u.Query().Get("host"); h != "" && !strings.HasPrefix(h, "/") && u.Host == "" {
		// A TCP host in the query is libpq's too; only a socket must be absolute.
		if strings.Contains(h, "/") {
			return fmt.Errorf("host %q: a socket folder must be absolute", h)
		}
	}
	return nil
}

func urlHasPassword(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}
