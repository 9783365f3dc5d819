package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/pelletier/go-toml/v2"
)

// maxFileSize bounds what Load reads; a configuration is a few kilobytes.
const maxFileSize = 1 << 20

// Load reads, parses and validates the configuration file at path. Errors
// about the file's content match ErrInvalid and name path and line; errors
// opening or reading it wrap the os error (errors.Is(err, fs.ErrNotExist)).
func Load(path string, kinds []Kind) (*Config, error) {
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
	c, err := Parse(data, path, kinds)
	if err != nil {
		return nil, err
	}
	if err := c.ResolvePaths(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse parses and validates a configuration whose source tables are of
// kinds (sources.Kinds); name (usually the file's path) is used in
// messages only. It reports every problem it finds, each as an
// *Error with its line (see Error, ErrInvalid): first TOML syntax; then
// unknown keys and values of the wrong type or syntax; then, once the
// document decodes, Validate's checks. Parse reads $HOME (for "~") and the
// state folder's environment (for defaults) but never the filesystem.
func Parse(data []byte, name string, kinds []Kind) (*Config, error) {
	data = data[:len(data):len(data)] // parser highlights locate by capacity
	s := newScanner(data, name, kinds)
	s.scan()
	if len(s.errs) > 0 {
		return nil, joinErrors(s.errs)
	}
	doc := reflect.New(document(kinds))
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc.Interface()); err != nil {
		s.convert(err)
		return nil, joinErrors(s.errs)
	}
	c := new(Config)
	*c = doc.Elem().Field(0).Interface().(Config)
	for i, k := range kinds {
		tables := doc.Elem().Field(i + 1)
		for j := range tables.Len() {
			c.Sources = append(c.Sources, Source{Kind: k.Table, Index: j, Table: tables.Index(j).Addr().Interface().(Table)})
		}
	}
	c.kinds, c.name, c.lines = kinds, name, s.lines
	c.resolve()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Marshal encodes c as TOML, the fixed tables and every source table of
// the kinds it was parsed with (for comparing two configurations key by
// key, as a reload logs what changed).
func (c *Config) Marshal() ([]byte, error) {
	doc := reflect.New(document(c.kinds)).Elem()
	doc.Field(0).Set(reflect.ValueOf(*c))
	for i, k := range c.kinds {
		field := doc.Field(i + 1)
		for _, s := range c.Sources {
			if s.Kind == k.Table {
				field.Set(reflect.Append(field, reflect.ValueOf(s.Table).Elem()))
			}
		}
	}
	return toml.Marshal(doc.Interface())
}
