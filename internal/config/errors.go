package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ErrInvalid is matched (with errors.Is) by every error about the content of
// a configuration: syntax, unknown keys, wrong types, and failed validation.
// Errors reading the file itself (fs.ErrNotExist, permissions) do not match
// it. The CLI maps it to its usage exit code.
var ErrInvalid = errors.New("invalid configuration")

// Error is one problem in a configuration. Parse, Load and Validate return
// one *Error, or several joined with errors.Join (in document order), so
// that an operator sees every problem at once; use errors.As to get the
// first.
type Error struct {
	// File is the name given to Parse or the path given to Load; empty for a
	// Config built in code.
	File string
	// Line is the 1-based line of the key (or of the table that lacks it);
	// 0 when unknown, e.g. for a Config built in code.
	Line int
	// Column is the 1-based byte column, set only for errors in the TOML
	// itself: syntax, or a key or table defined twice.
	Column int
	// Key is the full key, with 0-based indexes for arrays of tables:
	// "policy.disk_high", "worktrees[1].retention", "dirs[0].workspaces[2]".
	// Empty for syntax errors.
	Key string
	// Msg says what is wrong. It names the key itself only for unknown keys
	// and TOML-level errors (for example a key defined twice).
	Msg string

	// keyInMsg is set when Msg already names the key, so that Error() does
	// not repeat it.
	keyInMsg bool
}

// Error renders "config FILE:LINE: KEY: MSG", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	switch {
	case e.File != "":
		b.WriteByte(' ')
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
	case e.Line > 0:
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Line > 0 && e.Column > 0 {
		fmt.Fprintf(&b, ":%d", e.Column)
	}
	b.WriteString(": ")
	if e.Key != "" && !e.keyInMsg {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return RedactCredentials(b.String())
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// joinErrors returns nil, the only error, or all of them joined, sorted by
// line (stable, so problems on one line keep the order they were found in).
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// Errors lists the problems err holds (what Load, Parse, Validate and
// ResolvePaths return: one *Error, or several joined), in order; nil when
// err is nil. ok is false when err holds anything else than *Errors (a
// file that could not be read, say).
func Errors(err error) (errs []*Error, ok bool) {
	if err == nil {
		return nil, true
	}
	parts := []error{err}
	if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		parts = j.Unwrap()
	}
	for _, e := range parts {
		var ce *Error
		if !errors.As(e, &ce) {
			return errs, false
		}
		errs = append(errs, ce)
	}
	return errs, true
}

// userinfo is the "user:password@" of anything shaped like a URL, parsable
// or not (a malformed endpoint is quoted in its error too).
var userinfo = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)[^/?#\s@]+@`)

// RedactCredentials replaces the user and password of every URL in s with
// "[redacted]". Rule "no configuration message quotes a credential": every
// configuration error (Error.Error) and every logged configuration change
// passes through it, whatever the URL's key and however malformed it is.
func RedactCredentials(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userinfo.ReplaceAllString(s, "${1}[redacted]@")
}
