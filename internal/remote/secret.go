package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
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

// Scrub replaces the credential in text with "[redacted]": as it is, and
// in the escaped forms a provider echoing it could use (JSON, URL query
// and path escaping). Rule "no provider byte carries our credential
// onward": every byte read from a provider passes through Scrub before
// anything decodes, quotes or stores it. A credential shorter than 4
// characters is not searched for (it would redact at random).
func (s Secret) Scrub(text string) string {
	v := s.value
	if len(v) < 4 || text == "" {
		return text
	}
	for _, form := range s.forms() {
		text = strings.ReplaceAll(text, form, redacted)
	}
	return text
}

// ScrubBytes is Scrub of a provider's answer (a copy when it changes). A
// JSON document whose strings hold escapes (any character may be written
// \uXXXX) is decoded, scrubbed string by string, keys included, and
// encoded again; without a backslash every string is literal and the
// plain replacement is complete.
func (s Secret) ScrubBytes(data []byte) []byte {
	v := s.value
	if len(v) < 4 || len(data) == 0 {
		return data
	}
	for _, form := range s.forms() {
		if bytes.Contains(data, []byte(form)) {
			data = bytes.ReplaceAll(data, []byte(form), []byte(redacted))
		}
	}
	if bytes.IndexByte(data, '\\') < 0 {
		return data
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil || dec.More() {
		return data // not one JSON document: the plain replacement stands
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(s.scrubValue(doc)) != nil {
		return data
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (s Secret) scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, s.value, redacted)
	case []any:
		for i := range x {
			x[i] = s.scrubValue(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[strings.ReplaceAll(k, s.value, redacted)] = s.scrubValue(e)
		}
		return out
	}
	return v
}

const redacted = "[redacted]"

func (s Secret) forms() []string {
	forms := []string{s.value}
	add := func(f string) {
		if f != "" && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(s.value) == nil {
		add(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(b.String(), `"`), "\n"), `"`))
	}
	b.Reset()
	enc = json.NewEncoder(&b)
	if enc.Encode(s.value) == nil {
		add(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(b.String(), `"`), "\n"), `"`))
	}
	add(url.QueryEscape(s.value))
	add(url.PathEscape(s.value))
	return forms
}

// MaxQuoted is how much of a provider's message an error quotes.
const MaxQuoted = 200

// Quote makes provider text fit to quote in a message: scrubbed of s
// first, then cut to MaxQuoted bytes on a character boundary. Rule "scrub
// before cutting": cutting first would leave a credential straddling the
// cut all there but its tail.
func Quote(s Secret, data []byte) string {
	msg := strings.TrimSpace(s.Scrub(string(data)))
	if len(msg) <= MaxQuoted {
		return msg
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	// Never cut the marker itself: "[redac..." would read as a value.
	if i := strings.LastIndex(msg[:cut], redacted[:1]); i >= 0 && strings.HasPrefix(msg[i:], redacted) && i+len(redacted) > cut {
		cut = i + len(redacted)
	}
	return msg[:cut] + "..."
}
