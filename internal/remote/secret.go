package remote

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Secret is a credential. It prints as "[redacted]" in every format, so a
// log line or an error that picks it up by accident shows nothing.
type Secret struct{ value string }

// NewSecret wraps a credential value (tests, and values from a file).
func NewSecret(v string) Secret { return Secret{strings.TrimSpace(v)} }

// Reveal returns the credential, for the one header that carries it.
func (s Secret) Reveal() string { return s.value }

// IsZero tells whether no credential was found.
func (s Secret) IsZero() bool { return s.value == "" }

func (s Secret) String() string   { return "[redacted]" }
func (s Secret) GoString() string { return "remote.Secret{[redacted]}" }

// Format makes %v, %+v, %#v, %s and %q all print "[redacted]".
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, "[redacted]") }

// MarshalText keeps a Secret out of JSON and TOML output.
func (s Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// LoadSecret reads a credential from file when set (the first line, spaces
// trimmed), otherwise from the environment variable env. Messages name the
// variable or the file, never the value.
func LoadSecret(env, file string) (Secret, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Secret{}, fmt.Errorf("read credential file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		s := NewSecret(line)
		if s.IsZero() {
			return Secret{}, fmt.Errorf("read credential file %s: it is empty", file)
		}
		return s, nil
	}
	if env == "" {
		return Secret{}, errors.New("no credential: set an environment variable name or a file")
	}
	s := NewSecret(os.Getenv(env))
	if s.IsZero() {
		return Secret{}, fmt.Errorf("no credential: $%s is not set", env)
	}
	return s, nil
}
