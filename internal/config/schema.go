package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The schema is derived from the struct tags of Config and of each kind's
// table, so that a section added to Config, or a kind registered in package
// sources, is known to Parse without further work. Field types it
// knows: string, bool, int*, float64, Duration, Fraction, []string, map[string]string
// (a table of strings with names of the user's choosing, such as labels),
// structs (tables), []struct (arrays of tables), and pointers to these. Any other type panics
// on first use, which every test of this package catches.

// valueKind is what a key holds.
type valueKind int

const (
	kindTable valueKind = iota + 1
	kindTables
	kindString
	kindStrings
	kindDuration
	kindFraction
	kindBool
	kindInt
	kindFloat
	kindStringMap
)

// want describes what a key of this kind takes, for messages.
func (k valueKind) want() string {
	switch k {
	case kindTable:
		return "a table"
	case kindTables:
		return "an array of tables"
	case kindString:
		return "a string"
	case kindStrings:
		return "an array of strings"
	case kindDuration:
		return `a duration such as "14d", "1d12h", "90m" or "off"`
	case kindFraction:
		return `a fraction such as 0.85, a percentage such as "85%", or "off"`
	case kindBool:
		return "true or false"
	case kindInt:
		return "an integer"
	case kindFloat:
		return "a number"
	case kindStringMap:
		return `a table of strings such as {"name" = "value"}`
	}
	return "nothing"
}

type schemaInfo struct {
	kinds    map[string]valueKind // normalized key → kind
	children map[string][]string  // normalized key of a table → its key names
}

// schema returns the schema of a document whose source tables are of
// kinds: the fixed tables of Config, then an array of tables per kind.
func schema(kinds []Kind) *schemaInfo {
	s := &schemaInfo{kinds: map[string]valueKind{}, children: map[string][]string{}}
	s.addStruct(nil, reflect.TypeFor[Config]())
	for _, k := range kinds {
		s.add(keyPath{nameSeg(k.Table)}, reflect.SliceOf(tableType(k)))
	}
	return s
}

// tableType is the struct type of a kind's tables.
func tableType(k Kind) reflect.Type {
	t := reflect.TypeOf(k.New())
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: kind %s: New must return a pointer to a struct, not %s", k.Table, t))
	}
	return t.Elem()
}

// document is the type Parse decodes into and Marshal encodes: Config
// (embedded, so its tables stay at the top level) and a slice of each
// kind's tables, tagged with the kind's name.
func document(kinds []Kind) reflect.Type {
	fields := []reflect.StructField{{Name: "Config", Type: reflect.TypeFor[Config](), Anonymous: true}}
	for i, k := range kinds {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Kind%d", i), Type: reflect.SliceOf(tableType(k)),
			Tag: reflect.StructTag(fmt.Sprintf(`toml:%q`, k.Table)),
		})
	}
	return reflect.StructOf(fields)
}

var (
	durationType = reflect.TypeFor[Duration]()
	fractionType = reflect.TypeFor[Fraction]()
)

func (s *schemaInfo) addStruct(prefix keyPath, t reflect.Type) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			s.addStruct(prefix, ft) // go-toml flattens untagged embedded structs
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		s.add(prefix.with(nameSeg(tag)), ft)
	}
}

func (s *schemaInfo) add(path keyPath, t reflect.Type) {
	parent := path[:len(path)-1].norm()
	s.children[parent] = append(s.children[parent], path[len(path)-1].name)
	key := path.norm()
	switch {
	case t == durationType:
		s.kinds[key] = kindDuration
	case t == fractionType:
		s.kinds[key] = kindFraction
	case t.Kind() == reflect.String:
		s.kinds[key] = kindString
	case t.Kind() == reflect.Bool:
		s.kinds[key] = kindBool
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		s.kinds[key] = kindInt
	case t.Kind() == reflect.Float64:
		s.kinds[key] = kindFloat
	case t.Kind() == reflect.Struct:
		s.kinds[key] = kindTable
		s.addStruct(path, t)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		s.kinds[key] = kindStringMap
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		s.kinds[key] = kindStrings
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		s.kinds[key] = kindTables
		elem := path.with(indexSeg(0))
		s.kinds[elem.norm()] = kindTable
		s.addStruct(elem, t.Elem())
	default:
		panic(fmt.Sprintf("config: key %s has type %s, which Parse does not know", path, t))
	}
}

// suggest returns the known key of table parent nearest to name, or "".
func (s *schemaInfo) suggest(parent keyPath, name string) string {
	best, bestDist := "", max(1, len(name)/3)+1
	for _, c := range s.children[parent.norm()] {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyPath is a key as a list of segments: names, and indexes into arrays.
type keyPath []seg

type seg struct {
	name string
	idx  int // ≥ 0: an array index (name unused); -1: a name
}

func nameSeg(n string) seg  { return seg{name: n, idx: -1} }
func indexSeg(i int) seg    { return seg{idx: i} }
func (s seg) isIndex() bool { return s.idx >= 0 }

// with returns a new path; k is never modified.
func (k keyPath) with(s ...seg) keyPath { return append(slices.Clip(k), s...) }

// String renders the key as in Error.Key: "worktrees[1].retention".
func (k keyPath) String() string { return k.format(false) }

// norm renders the key with indexes left out ("worktrees[].retention"), as
// the schema knows it.
func (k keyPath) norm() string { return k.format(true) }

func (k keyPath) format(norm bool) string {
	var b strings.Builder
	for i, s := range k {
		if s.isIndex() {
			if norm {
				b.WriteString("[]")
			} else {
				fmt.Fprintf(&b, "[%d]", s.idx)
			}
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(s.name) {
			b.WriteString(s.name)
		} else {
			b.WriteString(strconv.Quote(s.name))
		}
	}
	return b.String()
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Keys lists every key a document whose sources are of kinds may hold,
// normalized (array indexes left out: "worktrees[].repo"), sorted: what
// the documentation tests hold the docs to.
func Keys(kinds []Kind) []string {
	s := schema(kinds)
	keys := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// KeysOf lists the keys written in a document (tables and keys alike),
// normalized as Keys lists them: what a test of an example file checks for
// completeness. It reports the document's syntax errors.
func KeysOf(data []byte, kinds []Kind) ([]string, error) {
	data = data[:len(data):len(data)]
	s := newScanner(data, "document", kinds)
	s.scan()
	if len(s.errs) > 0 {
		return nil, joinErrors(s.errs)
	}
	seen := map[string]bool{}
	for _, e := range s.entries {
		seen[e.path.norm()] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// IsTables tells whether key (normalized) is an array of tables.
func IsTables(kinds []Kind, key string) bool { return schema(kinds).kinds[key] == kindTables }
