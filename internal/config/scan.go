package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// scanner walks a document once with go-toml's parser, before it is decoded:
//   - it reports syntax errors with line and column;
//   - it records the line of every key, so that errors found later (by the
//     decoder or by Validate) can name their line;
//   - it checks every key against the schema, reporting every unknown key
//     and every value of the wrong type or syntax at once, with messages in
//     the words of this configuration rather than of Go types.
//
// go-toml's strict decoding runs afterwards as a second line of defence;
// convert turns its errors into the same form.
type scanner struct {
	data    []byte
	name    string
	starts  []int // offset of the start of each line
	schema  *schemaInfo
	arrays  map[string]int // array of tables (key with indexes) → elements so far
	entries []entry        // in document order
	lines   map[string]int // key → line of its first appearance
	unknown map[string]bool
	errs    []*Error
}

// entry is where a key (or a table header) appears.
type entry struct {
	path      keyPath
	line, col int
	header    unstable.Kind // Table or ArrayTable for a header; Invalid for a key
}

func newScanner(data []byte, name string, kinds []Kind) *scanner {
	s := &scanner{
		data:    data,
		name:    name,
		starts:  []int{0},
		schema:  schema(kinds),
		arrays:  map[string]int{},
		lines:   map[string]int{},
		unknown: map[string]bool{},
	}
	for i, c := range data {
		if c == '\n' {
			s.starts = append(s.starts, i+1)
		}
	}
	return s
}

// pos returns the 1-based line and column of a byte offset.
func (s *scanner) pos(offset int) (line, col int) {
	line = sort.Search(len(s.starts), func(i int) bool { return s.starts[i] > offset })
	return line, offset - s.starts[line-1] + 1
}

func (s *scanner) scan() {
	var p unstable.Parser
	p.Reset(s.data)
	var table keyPath
	known := true
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table, known = s.header(e)
		case unstable.KeyValue:
			path, line := s.key(table, e)
			if known {
				s.value(path, line, e.Value())
			}
		}
	}
	if err := p.Error(); err != nil {
		s.syntaxError(err)
	}
}

func (s *scanner) syntaxError(err error) {
	e := &Error{File: s.name, Msg: RedactCredentials(err.Error())}
	var perr *unstable.ParserError
	if errors.As(err, &perr) {
		offset := len(s.data)
		if perr.Highlight != nil {
			// The highlight is a subslice of the data, whose capacity Parse
			// made equal to its length.
			offset = min(max(cap(s.data)-cap(perr.Highlight), 0), len(s.data))
		}
		e.Line, e.Column = s.pos(offset)
		e.Msg = perr.Message
	}
	s.errs = append(s.errs, e)
}

func (s *scanner) add(path keyPath, line int, format string, args ...any) {
	s.errs = append(s.errs, &Error{File: s.name, Line: line, Key: path.String(), Msg: RedactCredentials(fmt.Sprintf(format, args...))})
}

func (s *scanner) record(path keyPath, line, col int, header unstable.Kind) {
	s.entries = append(s.entries, entry{path: path, line: line, col: col, header: header})
	if _, ok := s.lines[path.String()]; !ok {
		s.lines[path.String()] = line
	}
}

// keyParts returns the names of a dotted key and the position of its first
// part.
func (s *scanner) keyParts(n *unstable.Node) (parts []string, line, col int) {
	it := n.Key()
	first := true
	for it.Next() {
		k := it.Node()
		if first {
			line, col = s.pos(int(k.Raw.Offset))
			first = false
		}
		parts = append(parts, string(k.Data))
	}
	return parts, line, col
}

// header records a [table] or [[array]] header and returns the table that
// the following keys belong to, and whether it is known.
func (s *scanner) header(e *unstable.Node) (keyPath, bool) {
	parts, line, col := s.keyParts(e)
	var path keyPath
	for i, name := range parts {
		path = path.with(nameSeg(name))
		n := s.arrays[path.String()]
		switch {
		case i < len(parts)-1 && n > 0:
			path = path.with(indexSeg(n - 1)) // [a.b] after [[a]]: the last a
		case i == len(parts)-1 && e.Kind == unstable.ArrayTable:
			s.arrays[path.String()] = n + 1
			path = path.with(indexSeg(n))
		}
	}
	s.record(path, line, col, e.Kind)

	if e.Kind == unstable.ArrayTable {
		base := path[:len(path)-1]
		switch k, ok := s.schema.kinds[base.norm()]; {
		case !ok:
			return path, !s.reportUnknown(path, line, e.Kind)
		case k == kindTable:
			s.add(base, line, "is a single table: write [%s], not [[%s]]", base, base)
			return path, false
		case k != kindTables:
			s.add(base, line, "want %s, got an array of tables", k.want())
			return path, false
		}
		return path, true
	}
	switch k, ok := s.schema.kinds[path.norm()]; {
	case !ok:
		return path, !s.reportUnknown(path, line, e.Kind)
	case k == kindTables:
		s.add(path, line, "is an array of tables: write [[%s]] for each entry", path)
		return path, false
	case k != kindTable && k != kindStringMap:
		s.add(path, line, "want %s, got a table", k.want())
		return path, false
	}
	return path, true
}

// key records a key = value line (or an entry of an inline table) and
// returns its full key and line.
func (s *scanner) key(table keyPath, e *unstable.Node) (keyPath, int) {
	parts, line, col := s.keyParts(e)
	path := table
	for _, name := range parts {
		path = path.with(nameSeg(name))
	}
	s.record(path, line, col, unstable.Invalid)
	return path, line
}

// value checks the value v of key path against the schema.
func (s *scanner) value(path keyPath, line int, v *unstable.Node) {
	k, ok := s.schema.kinds[path.norm()]
	if !ok {
		if s.inStringMap(path, line, v) {
			return
		}
		s.reportUnknown(path, line, unstable.Invalid)
		return
	}
	switch k {
	case kindStringMap:
		if v.Kind != unstable.InlineTable {
			s.wrongType(path, line, k, v)
			return
		}
		s.inlineTable(path, v)
	case kindTable:
		if v.Kind != unstable.InlineTable {
			s.wrongType(path, line, k, v)
			return
		}
		s.inlineTable(path, v)
	case kindTables:
		if v.Kind != unstable.Array {
			s.wrongType(path, line, k, v)
			return
		}
		s.elements(path, v, func(el keyPath, elLine int, n *unstable.Node) {
			if n.Kind != unstable.InlineTable {
				s.wrongType(el, elLine, kindTable, n)
				return
			}
			s.inlineTable(el, n)
		})
	case kindStrings:
		if v.Kind != unstable.Array {
			s.wrongType(path, line, k, v)
			return
		}
		s.elements(path, v, func(el keyPath, elLine int, n *unstable.Node) {
			if n.Kind != unstable.String {
				s.wrongType(el, elLine, kindString, n)
			}
		})
	case kindString:
		s.wantKind(path, line, k, v, unstable.String)
	case kindBool:
		s.wantKind(path, line, k, v, unstable.Bool)
	case kindInt:
		s.wantKind(path, line, k, v, unstable.Integer)
	case kindFloat:
		if v.Kind != unstable.Integer && v.Kind != unstable.Float {
			s.wrongType(path, line, k, v)
		}
	case kindDuration:
		if !s.wantKind(path, line, k, v, unstable.String) {
			return
		}
		if _, err := ParseDuration(string(v.Data)); err != nil {
			s.add(path, line, "%v", err)
		}
	case kindFraction:
		switch v.Kind {
		case unstable.String:
			if _, err := ParseFraction(string(v.Data)); err != nil {
				s.add(path, line, "%v", err)
			}
		case unstable.Float:
			f, err := strconv.ParseFloat(strings.ReplaceAll(string(v.Data), "_", ""), 64)
			if err == nil {
				err = checkFraction(f)
			}
			if err != nil {
				s.add(path, line, "%s %v", v.Data, err)
			}
		default:
			s.wrongType(path, line, k, v)
		}
	}
}

func (s *scanner) wantKind(path keyPath, line int, k valueKind, v *unstable.Node, want unstable.Kind) bool {
	if v.Kind != want {
		s.wrongType(path, line, k, v)
		return false
	}
	return true
}

func (s *scanner) wrongType(path keyPath, line int, k valueKind, v *unstable.Node) {
	s.add(path, line, "want %s, got %s", k.want(), describe(v))
}

// describe names a value for messages: `the integer 14`.
func describe(v *unstable.Node) string {
	lit := string(v.Data)
	if len(lit) > 40 {
		lit = lit[:37] + "..."
	}
	switch v.Kind {
	case unstable.String:
		return "the string " + strconv.Quote(lit)
	case unstable.Integer:
		return "the integer " + lit
	case unstable.Float:
		return "the number " + lit
	case unstable.Bool:
		return "the boolean " + lit
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "a table"
	case unstable.DateTime, unstable.LocalDateTime, unstable.LocalDate, unstable.LocalTime:
		return "the date/time " + lit
	}
	return v.Kind.String()
}

// elements records each element of array v (the value of the key recorded
// last) and calls f with its key and line.
func (s *scanner) elements(path keyPath, v *unstable.Node, f func(keyPath, int, *unstable.Node)) {
	parent := s.entries[len(s.entries)-1]
	it := v.Children()
	for i := 0; it.Next(); i++ {
		n := it.Node()
		line, col := parent.line, parent.col
		if n.Raw.Offset > 0 { // unset for arrays; an element never starts a document
			line, col = s.pos(int(n.Raw.Offset))
		}
		el := path.with(indexSeg(i))
		s.record(el, line, col, unstable.Invalid)
		f(el, line, n)
	}
}

func (s *scanner) inlineTable(path keyPath, v *unstable.Node) {
	it := v.Children()
	for it.Next() {
		kv := it.Node()
		if kv.Kind != unstable.KeyValue {
			continue
		}
		child, line := s.key(path, kv)
		s.value(child, line, kv.Value())
	}
}

// inStringMap checks an entry of a table of strings (labels), whose names
// are the user's: it must be a string, directly in the table. It returns
// false when path lies in no such table.
func (s *scanner) inStringMap(path keyPath, line int, v *unstable.Node) bool {
	for i := len(path) - 1; i > 0; i-- {
		if s.schema.kinds[path[:i].norm()] != kindStringMap {
			continue
		}
		if i != len(path)-1 {
			s.add(path[:i+1], line, "a name with dots must be quoted: write %s.%q", path[:i], strings.Join(names(path[i:]), "."))
			return true
		}
		s.wantKind(path, line, kindString, v, unstable.String)
		return true
	}
	return false
}

func names(k keyPath) []string {
	var out []string
	for _, s := range k {
		out = append(out, s.name)
	}
	return out
}

// reportUnknown reports the first part of path that the schema does not
// know, once per such key. header is the kind of header that path comes
// from, or Invalid for a key. It returns false when the schema knows the
// whole path.
func (s *scanner) reportUnknown(path keyPath, line int, header unstable.Kind) bool {
	for i := 1; i <= len(path); i++ {
		prefix := path[:i]
		if _, ok := s.schema.kinds[prefix.norm()]; ok {
			continue
		}
		key := prefix.String()
		if s.unknown[key] {
			return true
		}
		s.unknown[key] = true
		parent, last := path[:i-1], path[i-1]
		var msg string
		switch {
		case last.isIndex():
			msg = fmt.Sprintf("%s is not an array", parent)
		case header == unstable.Table && i == len(path):
			msg = fmt.Sprintf("unknown table [%s]", prefix)
		case header == unstable.ArrayTable && i == len(path)-1:
			msg = fmt.Sprintf("unknown array of tables [[%s]]", prefix)
		case len(parent) == 0:
			msg = fmt.Sprintf("unknown key %q at top level", last.name)
		case parent[len(parent)-1].isIndex():
			msg = fmt.Sprintf("unknown key %q in %s", last.name, parent)
		default:
			msg = fmt.Sprintf("unknown key %q in [%s]", last.name, parent)
		}
		if !last.isIndex() {
			if hint := s.schema.suggest(parent, last.name); hint != "" {
				msg += fmt.Sprintf("; did you mean %q?", hint)
			}
		}
		s.errs = append(s.errs, &Error{File: s.name, Line: line, Key: key, Msg: msg, keyInMsg: true})
		return true
	}
	return false
}

// at returns the last entry at or before line:col, the key an error found
// there belongs to.
func (s *scanner) at(line, col int) (entry, bool) {
	i := sort.Search(len(s.entries), func(i int) bool {
		e := s.entries[i]
		return e.line > line || e.line == line && e.col > col
	})
	if i == 0 {
		return entry{}, false
	}
	return s.entries[i-1], true
}

// convert turns an error of go-toml's decoder into *Errors of s.errs.
func (s *scanner) convert(err error) {
	var strict *toml.StrictMissingError
	var decode *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		for i := range strict.Errors {
			de := &strict.Errors[i]
			line, col := de.Position()
			if e, ok := s.at(line, col); ok && s.reportUnknown(e.path, line, e.header) {
				continue
			}
			s.errs = append(s.errs, &Error{File: s.name, Line: line,
				Key: keyPath(nil).withNames(de.Key()).String(), Msg: "unknown key"})
		}
	case errors.As(err, &decode):
		line, col := decode.Position()
		e := &Error{File: s.name, Line: line, Column: col, Msg: RedactCredentials(strings.TrimPrefix(decode.Error(), "toml: ")), keyInMsg: true}
		if en, ok := s.at(line, col); ok {
			e.Key = en.path.String()
		}
		s.errs = append(s.errs, e)
	default:
		s.errs = append(s.errs, &Error{File: s.name, Msg: RedactCredentials(strings.TrimPrefix(err.Error(), "toml: "))})
	}
}

func (k keyPath) withNames(names []string) keyPath {
	for _, n := range names {
		k = k.with(nameSeg(n))
	}
	return k
}
