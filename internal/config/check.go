package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Check is what a source table's Check method reports its problems to:
// keys are relative to the table ("home", "workspaces[1]"; "" is the
// table itself), and each problem names the file and line of its key.
type Check struct {
	v      *validator
	prefix string // the table's key: "docker[0]"
}

func (c *Check) key(k string) string {
	if k == "" {
		return c.prefix
	}
	return c.prefix + "." + k
}

// Add reports a problem with key.
func (c *Check) Add(key, format string, args ...any) { c.v.add(c.key(key), format, args...) }

// Subpath checks a path relative to base (a runtime folder, a home):
// relative, clean, no "..", no "~".
func (c *Check) Subpath(key, p, base string) { c.v.subpath(c.key(key), p, base) }

// ContainerPath checks a path inside a container: absolute and clean,
// not "/".
func (c *Check) ContainerPath(key, p string) {
	switch {
	case !strings.HasPrefix(p, "/"):
		c.Add(key, "%q must be an absolute path inside the container", p)
	case p == "/":
		c.Add(key, `"/" is the container's whole filesystem: name a mount point`)
	case filepath.Clean(p) != p:
		c.Add(key, "%q is not clean: write %q", p, filepath.Clean(p))
	}
}

// MaxRate bounds rate (requests a second to one source).
const MaxRate = 1000.0

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Remote checks the keys every remote table shares: an endpoint (when
// set), a credential named by an environment variable or a file but not
// both, and a rate in (0, MaxRate].
func (c *Check) Remote(endpoint, envKey, env, fileKey, file string, rate *float64) {
	if endpoint != "" {
		c.Endpoint("endpoint", endpoint)
	}
	if env != "" && !envName.MatchString(env) {
		c.Add(envKey, "%q is not an environment variable name", env)
	}
	if env != "" && file != "" {
		c.Add(fileKey, "set %s or %s, not both", envKey, fileKey)
	}
	if rate != nil && (*rate <= 0 || *rate > MaxRate) {
		c.Add("rate", "%v: want more than 0 and at most %v requests a second", *rate, MaxRate)
	}
}

// Endpoint checks a provider URL: http(s), no credentials in it, and
// plain http only to a loopback address (a credential goes with every
// request).
func (c *Check) Endpoint(key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		c.Add(key, "%q is not an http(s) URL", raw)
	case u.User != nil:
		c.Add(key, "must not hold credentials; use the key or token settings")
	case u.RawQuery != "" || u.Fragment != "":
		c.Add(key, "%q: no query or fragment", raw)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		c.Add(key, "%q: plain http is allowed only to a loopback address; use https", raw)
	}
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Selector checks a table of labels or metadata that selects what a source
// manages; required when an empty one would select everything.
func (c *Check) Selector(key string, m map[string]string, required bool, what string) {
	if required && len(m) == 0 {
		c.Add(key, "is required: without %s every sandbox of the account would be managed", what)
	}
	for k := range m {
		if strings.TrimSpace(k) == "" {
			c.Add(key, "an empty key selects nothing")
		}
	}
}

// Quoted renders a selector as TOML would, keys sorted: { a = "b" }.
func Quoted(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		name := k
		if !isBareKey(k) {
			name = fmt.Sprintf("%q", k)
		}
		parts[i] = fmt.Sprintf("%s = %q", name, m[k])
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// Pairs renders a selector as k=v,k=v, keys sorted: part of an identity.
func Pairs(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
