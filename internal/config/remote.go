package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Remote sources: sandboxes at a provider, selected by metadata or labels.
// Credentials are never written in the file: the file names an environment
// variable or a file that holds them.

// Default endpoints and credential variables.
const (
	DefaultE2BEndpoint     = "https://api.e2b.app"
	DefaultE2BKeyEnv       = "E2B_API_KEY"
	DefaultDaytonaEndpoint = "https://app.daytona.io/api"
	DefaultDaytonaKeyEnv   = "DAYTONA_API_KEY"
	// MaxRate bounds rate (requests a second to one source).
	MaxRate = 1000.0
)

// E2BSource is one [[e2b]] table: the E2B sandboxes whose metadata match.
type E2BSource struct {
	// Endpoint (endpoint) is the API's base URL. Default
	// "https://api.e2b.app". https, or http to a loopback address.
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env) names the environment variable holding the
	// API key. Default "E2B_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) is a file whose first line is the API key;
	// it replaces api_key_env. Absolute, "~/" expands.
	APIKeyFile string `toml:"api_key_file"`
	// Metadata (metadata, required) selects the sandboxes reclaimer
	// manages: every key must match. No other sandbox is ever touched.
	Metadata map[string]string `toml:"metadata"`
	// Rate (rate) is the requests a second sent to this source. Default 10.
	Rate *float64 `toml:"rate"`

	PolicyOverrides
}

// Table returns "e2b".
func (E2BSource) Table() string { return "e2b" }

// DaytonaSource is one [[daytona]] table: the Daytona sandboxes whose
// labels match.
type DaytonaSource struct {
	// Endpoint (endpoint): default "https://app.daytona.io/api".
	Endpoint string `toml:"endpoint"`
	// APIKeyEnv (api_key_env): default "DAYTONA_API_KEY".
	APIKeyEnv string `toml:"api_key_env"`
	// APIKeyFile (api_key_file) replaces api_key_env.
	APIKeyFile string `toml:"api_key_file"`
	// Labels (labels, required) select the sandboxes reclaimer manages.
	Labels map[string]string `toml:"labels"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	PolicyOverrides
}

// Table returns "daytona".
func (DaytonaSource) Table() string { return "daytona" }

// HTTPSource is one [[http]] table: a server of the http backend protocol
// (api/http-backend.yaml).
type HTTPSource struct {
	// Endpoint (endpoint, required): the protocol's base URL.
	Endpoint string `toml:"endpoint"`
	// TokenEnv (token_env) names the variable holding the bearer token.
	TokenEnv string `toml:"token_env"`
	// TokenFile (token_file) replaces token_env.
	TokenFile string `toml:"token_file"`
	// Labels (labels) select the runtimes reclaimer manages. Optional: the
	// server is reclaimer's own extension point and serves only what it
	// means reclaimer to manage.
	Labels map[string]string `toml:"labels"`
	// Rate (rate): requests a second. Default 10.
	Rate *float64 `toml:"rate"`

	PolicyOverrides
}

// Table returns "http".
func (HTTPSource) Table() string { return "http" }

// Resolved values: defaults filled in.

// RateOf returns a rate key's value, 0 (the client's default) when unset.
func RateOf(r *float64) float64 {
	if r == nil {
		return 0
	}
	return *r
}

// KeyEnv returns api_key_env or its default (none when a file is set).
func (s E2BSource) KeyEnv() string { return keyEnv(s.APIKeyEnv, s.APIKeyFile, DefaultE2BKeyEnv) }

// URL returns endpoint or its default.
func (s E2BSource) URL() string { return orDefault(s.Endpoint, DefaultE2BEndpoint) }

// KeyEnv returns api_key_env or its default.
func (s DaytonaSource) KeyEnv() string {
	return keyEnv(s.APIKeyEnv, s.APIKeyFile, DefaultDaytonaKeyEnv)
}

// URL returns endpoint or its default.
func (s DaytonaSource) URL() string { return orDefault(s.Endpoint, DefaultDaytonaEndpoint) }

func keyEnv(env, file, def string) string {
	if file != "" {
		return ""
	}
	return orDefault(env, def)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// remoteSource checks the keys every remote table shares.
func (v *validator) remoteSource(key, endpoint, envKey, env, fileKey, file string, rate *float64) {
	if endpoint != "" {
		v.endpoint(key+".endpoint", endpoint)
	}
	if env != "" && !envName.MatchString(env) {
		v.add(key+"."+envKey, "%q is not an environment variable name", env)
	}
	if env != "" && file != "" {
		v.add(key+"."+fileKey, "set %s or %s, not both", envKey, fileKey)
	}
	if file != "" {
		v.absPath(key+"."+fileKey, file, "")
	}
	if rate != nil && (*rate <= 0 || *rate > MaxRate) {
		v.add(key+".rate", "%v: want more than 0 and at most %v requests a second", *rate, MaxRate)
	}
}

// endpoint checks a provider URL: http(s), no credentials in it, and
// plain http only to a loopback address (a credential goes with every
// request).
func (v *validator) endpoint(key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		v.add(key, "%q is not an http(s) URL", raw)
	case u.User != nil:
		v.add(key, "must not hold credentials; use the key or token settings")
	case u.RawQuery != "" || u.Fragment != "":
		v.add(key, "%q: no query or fragment", raw)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		v.add(key, "%q: plain http is allowed only to a loopback address; use https", raw)
	}
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *validator) selector(key string, m map[string]string, required bool, what string) {
	if required && len(m) == 0 {
		v.add(key, "is required: without %s every sandbox of the account would be managed", what)
	}
	for k := range m {
		if k == "" {
			v.add(key, "an empty key selects nothing")
		}
	}
}

func (v *validator) remote(c *Config) {
	for i := range c.E2B {
		s := &c.E2B[i]
		key := fmt.Sprintf("e2b[%d]", i)
		v.remoteSource(key, s.Endpoint, "api_key_env", s.APIKeyEnv, "api_key_file", s.APIKeyFile, s.Rate)
		v.selector(key+".metadata", s.Metadata, true, "a metadata selector")
		v.policy(key, s.PolicyOverrides, s)
	}
	for i := range c.Daytona {
		s := &c.Daytona[i]
		key := fmt.Sprintf("daytona[%d]", i)
		v.remoteSource(key, s.Endpoint, "api_key_env", s.APIKeyEnv, "api_key_file", s.APIKeyFile, s.Rate)
		v.selector(key+".labels", s.Labels, true, "a label selector")
		v.policy(key, s.PolicyOverrides, s)
	}
	for i := range c.HTTP {
		s := &c.HTTP[i]
		key := fmt.Sprintf("http[%d]", i)
		if s.Endpoint == "" {
			v.add(key, "endpoint is required")
		}
		v.remoteSource(key, s.Endpoint, "token_env", s.TokenEnv, "token_file", s.TokenFile, s.Rate)
		if s.TokenEnv == "" && s.TokenFile == "" {
			v.add(key, "set token_env or token_file: the server must know it is reclaimer calling")
		}
		v.selector(key+".labels", s.Labels, false, "")
		v.policy(key, s.PolicyOverrides, s)
	}
}
