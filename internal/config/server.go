package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// headerName is an HTTP header name (a token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// Server is the [server] table: how `reclaimer serve` runs.
type Server struct {
	// Listen (listen) is where the HTTP API listens: "host:port", or
	// "unix:/absolute/path" for a Unix socket. Default DefaultListen.
	Listen string `toml:"listen"`
	// Interval (interval) is the time between two passes of the
	// reconciler. Default DefaultInterval.
	Interval *Duration `toml:"interval"`
	// TokenFile (token_file) holds the bearer token every request but
	// /healthz must carry. Default: api.token in the state folder, made at
	// first start (mode 0600). Required, explicitly, to listen on any
	// address but loopback or a Unix socket.
	TokenFile string `toml:"token_file"`
	// LogFormat (log_format) is "text" (default) or "json".
	LogFormat string `toml:"log_format"`
	// LogLevel (log_level) is "debug", "info" (default), "warn" or "error".
	LogLevel string `toml:"log_level"`
	// HoldWait (hold_wait) bounds how long taking a hold waits while a pass
	// acts on that runtime. Default DefaultHoldWait.
	HoldWait *Duration `toml:"hold_wait"`
	// Name (name) is this replica's name in a fleet ([ledger] url set):
	// it owns the local sources of this configuration (worktrees, dirs,
	// docker), whose source names it prefixes. Default: the host name.
	Name string `toml:"name"`
	// LeaderLease (leader_lease) is the leadership lease for remote
	// sources in a fleet. Default DefaultLeaderLease.
	LeaderLease *Duration `toml:"leader_lease"`
	// UsageRetention (usage_retention) is how long the usage samples each
	// pass records (per managed filesystem) are kept. Default
	// DefaultUsageRetention.
	UsageRetention *Duration `toml:"usage_retention"`
	// JournalRetention (journal_retention) is how long a finished journal
	// entry, and a notice with its webhook deliveries, is kept; "off"
	// keeps them all. Unfinished entries are always kept. Default
	// DefaultJournalRetention.
	JournalRetention *Duration `toml:"journal_retention"`
	// PassTimeout (pass_timeout) is the deadline of one pass, CLI or
	// daemon: planning that has not finished by then fails the pass, and
	// the actions apply has not reached by then are left for the next
	// pass, each reported. Default DefaultPassTimeout.
	PassTimeout *Duration `toml:"pass_timeout"`
	// NoticeHorizon (notice_horizon) bounds the outbox of webhook
	// deliveries: a notice recorded longer ago and not delivered (the
	// daemon was down or stopped before it got through) is not sent
	// any more. Default DefaultNoticeHorizon.
	NoticeHorizon *Duration `toml:"notice_horizon"`
}

// Notify is one [[notify]] table: a webhook.
type Notify struct {
	// URL (url, required) receives a POST of each notice as JSON.
	URL string `toml:"url"`
	// Events (events) are the kinds sent: scheduled, reclaimed, archived,
	// failed. Default: all of them.
	Events []string `toml:"events"`
	// Secret (secret) signs each delivery: the header X-Reclaimer-Signature
	// is "sha256=" and the hex HMAC-SHA256, with this key, of the
	// timestamp, the delivery id and the body (see notify.Sign).
	Secret string `toml:"secret"`
	// SecretFile (secret_file) is a file whose first line is the secret,
	// instead of secret.
	SecretFile string `toml:"secret_file"`
	// Header (header) and HeaderFile (header_file): a header sent with
	// every POST, its value the first line of the file (e.g. header =
	// "Authorization" and a file holding "Bearer ..."). A receiver wanting
	// a credential gets it this way: a URL with user:password@ is
	// refused, as it would be quoted in the journal and the logs.
	Header     string `toml:"header"`
	HeaderFile string `toml:"header_file"`
}

// Secrets reads the signing secret and the header value of n (from the
// file keys when set). Messages name the files, never a value.
func (n Notify) Secrets() (secret, header string, err error) {
	secret = n.Secret
	if n.SecretFile != "" {
		if secret, err = firstLine(n.SecretFile); err != nil {
			return "", "", fmt.Errorf("notify %s: secret_file: %w", RedactCredentials(n.URL), err)
		}
	}
	if n.HeaderFile != "" {
		if header, err = firstLine(n.HeaderFile); err != nil {
			return "", "", fmt.Errorf("notify %s: header_file: %w", RedactCredentials(n.URL), err)
		}
	}
	return secret, header, nil
}

func firstLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return line, nil
}

// Defaults of [server].
const (
	DefaultListen   = "127.0.0.1:7390"
	DefaultInterval = 5 * time.Minute
	DefaultHoldWait = 10 * time.Second
	// DefaultLeaderLease is [server] leader_lease's default.
	DefaultLeaderLease = 15 * time.Second
	// MinLeaderLease is the shortest lease accepted: renewals go every
	// third of it, and a fenced write may take a second.
	MinLeaderLease = time.Second
	// DefaultUsageRetention keeps a month of usage samples: at the
	// default interval, 8,640 per filesystem.
	DefaultUsageRetention = 30 * 24 * time.Hour
	// DefaultJournalRetention keeps a quarter of the journal and the
	// notices: what was done to a runtime, and why, stays readable long
	// after the runtime is gone, and the ledger stops growing.
	DefaultJournalRetention = 90 * 24 * time.Hour
	// DefaultPassTimeout is long enough for a large apply (the action in
	// flight at the deadline finishes; its own timeouts bound it), short
	// enough that a stalled provider does not hold passes for hours.
	DefaultPassTimeout = 30 * time.Minute
	// DefaultNoticeHorizon is three of the default notice periods: a
	// scheduled notice delivered that late still comes before the step
	// of a longer grace, and a daemon down for a weekend does not
	// announce what happened days ago.
	DefaultNoticeHorizon = 72 * time.Hour
)

// NotifyEvents are the kinds of notices a webhook may receive.
var NotifyEvents = []string{"scheduled", "reclaimed", "archived", "failed"}

// ServerSettings is [server] resolved to plain values.
type ServerSettings struct {
	Listen    string
	Interval  time.Duration
	TokenFile string // empty: the default in the state folder
	LogFormat string
	LogLevel  string
	HoldWait  time.Duration
	// Name is the replica's name ([server] name, else the host name).
	Name        string
	LeaderLease time.Duration
	// UsageRetention is how long usage samples are kept.
	UsageRetention time.Duration
	// JournalRetention is how long finished journal entries and notices
	// are kept; 0 keeps them all.
	JournalRetention time.Duration
	// PassTimeout is the deadline of one pass.
	PassTimeout time.Duration
	// NoticeHorizon is how old an undelivered notice may be and still be
	// sent.
	NoticeHorizon time.Duration
}

// ServerSettings resolves [server] with its defaults.
func (c *Config) ServerSettings() ServerSettings {
	s := ServerSettings{Listen: c.Server.Listen, Interval: DefaultInterval, TokenFile: c.Server.TokenFile,
		LogFormat: c.Server.LogFormat, LogLevel: c.Server.LogLevel, HoldWait: DefaultHoldWait,
		UsageRetention: DefaultUsageRetention, JournalRetention: DefaultJournalRetention, PassTimeout: DefaultPassTimeout, NoticeHorizon: DefaultNoticeHorizon}
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if c.Server.Interval != nil {
		s.Interval = time.Duration(*c.Server.Interval)
	}
	if c.Server.HoldWait != nil {
		s.HoldWait = time.Duration(*c.Server.HoldWait)
	}
	if c.Server.UsageRetention != nil {
		s.UsageRetention = time.Duration(*c.Server.UsageRetention)
	}
	if c.Server.JournalRetention != nil {
		s.JournalRetention = time.Duration(*c.Server.JournalRetention)
	}
	if c.Server.PassTimeout != nil && *c.Server.PassTimeout > 0 {
		s.PassTimeout = time.Duration(*c.Server.PassTimeout)
	}
	if c.Server.NoticeHorizon != nil {
		s.NoticeHorizon = time.Duration(*c.Server.NoticeHorizon)
	}
	if s.LogFormat == "" {
		s.LogFormat = "text"
	}
	if s.LogLevel == "" {
		s.LogLevel = "info"
	}
	s.Name = c.ReplicaName()
	s.LeaderLease = DefaultLeaderLease
	if c.Server.LeaderLease != nil {
		s.LeaderLease = time.Duration(*c.Server.LeaderLease)
	}
	return s
}

// ListenIsLocal reports whether a listen address is reachable only from
// this host: a Unix socket or a loopback address.
func ListenIsLocal(listen string) bool {
	if strings.HasPrefix(listen, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// server checks [server] and [[notify]].
func (v *validator) server() {
	s := v.c.Server
	if s.Listen != "" {
		if p, ok := strings.CutPrefix(s.Listen, "unix:"); ok {
			if !filepath.IsAbs(p) {
				v.add("server.listen", "%q: a Unix socket path must be absolute", s.Listen)
			}
		} else if _, port, err := net.SplitHostPort(s.Listen); err != nil || port == "" {
			v.add("server.listen", `%q: want "host:port" or "unix:/path"`, s.Listen)
		}
	}
	if s.Interval != nil && *s.Interval <= 0 {
		v.add("server.interval", "must be positive")
	}
	if s.HoldWait != nil && *s.HoldWait < 0 {
		v.add("server.hold_wait", "must not be negative")
	}
	if s.UsageRetention != nil && time.Duration(*s.UsageRetention) < time.Hour {
		v.add("server.usage_retention", "must be at least an hour")
	}
	// Zero is "off" (keep everything); anything else under an hour is a
	// typo ("90" minutes meant as days?) that would empty the journal.
	if s.JournalRetention != nil && *s.JournalRetention != 0 && time.Duration(*s.JournalRetention) < time.Hour {
		v.add("server.journal_retention", `must be at least an hour, or "off"`)
	}
	if s.PassTimeout != nil && *s.PassTimeout <= 0 {
		v.add("server.pass_timeout", "must be positive")
	}
	if s.NoticeHorizon != nil && time.Duration(*s.NoticeHorizon) < time.Minute {
		v.add("server.notice_horizon", "must be at least a minute")
	}
	if s.TokenFile != "" {
		v.absPath("server.token_file", s.TokenFile, "token file")
	}
	if s.LogFormat != "" && s.LogFormat != "text" && s.LogFormat != "json" {
		v.add("server.log_format", `%q: want "text" or "json"`, s.LogFormat)
	}
	if s.LogLevel != "" && !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		v.add("server.log_level", `%q: want "debug", "info", "warn" or "error"`, s.LogLevel)
	}
	v.fleet()
	for i, n := range v.c.Notify {
		key := fmt.Sprintf("notify[%d]", i)
		u, err := url.Parse(n.URL)
		switch {
		case n.URL == "":
			v.add(key, "url is required")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.add(key+".url", "%q: want an http:// or https:// URL", n.URL)
		case u.User != nil:
			// Rule "no credential in a webhook URL": it would be written
			// into every notify journal entry, warning and change log.
			v.add(key+".url", "%q: must not hold a user or password; send a credential with header and header_file", n.URL)
		}
		if n.Secret != "" && n.SecretFile != "" {
			v.add(key+".secret_file", "set secret or secret_file, not both")
		}
		if n.SecretFile != "" {
			v.absPath(key+".secret_file", n.SecretFile, "secret file")
		}
		switch {
		case (n.Header == "") != (n.HeaderFile == ""):
			v.add(key+".header", "header and header_file go together")
		case n.Header != "":
			if !headerName.MatchString(n.Header) {
				v.add(key+".header", "%q is not a header name", n.Header)
			} else if h := http.CanonicalHeaderKey(n.Header); h == "Content-Type" || h == "Host" || h == "Content-Length" || strings.HasPrefix(h, "X-Reclaimer-") {
				v.add(key+".header", "%q is set by reclaimer itself", n.Header)
			}
			v.absPath(key+".header_file", n.HeaderFile, "header file")
		}
		for j, e := range n.Events {
			if !slices.Contains(NotifyEvents, e) {
				v.add(fmt.Sprintf("%s.events[%d]", key, j), "unknown event %q (%s)", e, strings.Join(NotifyEvents, ", "))
			}
		}
	}
}
