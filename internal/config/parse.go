package config

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/pelletier/go-toml/v2"
)

// maxFileSize bounds what Load reads; a configuration is a few kilobytes.
const maxFileSize = 1 << 20

// Load reads, parses and validates the configuration file at path. Errors
// about the file's content match ErrInvalid and name path and line; errors
// opening or reading it wrap the os error (errors.Is(err, fs.ErrNotExist)).
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d bytes", maxFileSize)}
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if err := c.ResolvePaths(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse parses and validates a configuration; name (usually the file's path)
// is used in messages only. It reports every problem it finds, each as an
// *Error with its line (see Error, ErrInvalid): first TOML syntax; then
// unknown keys and values of the wrong type or syntax; then, once the
// document decodes, Validate's checks. Parse reads $HOME (for "~") and the
// state folder's environment (for defaults) but never the filesystem.
func Parse(data []byte, name string) (*Config, error) {
	data = data[:len(data):len(data)] // parser highlights locate by capacity
	s := newScanner(data, name)
	s.scan()
	if len(s.errs) > 0 {
		return nil, joinErrors(s.errs)
	}
	c := &Config{}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		s.convert(err)
		return nil, joinErrors(s.errs)
	}
	c.name, c.lines = name, s.lines
	c.resolve()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
