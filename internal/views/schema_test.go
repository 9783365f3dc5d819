package views_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/api"
	"github.com/reclaimer/reclaimer/internal/views"
)

// viewTypes are the views the API document must describe, by the name its
// schemas give them (x-go-type). A view added here without a schema, or a
// schema naming a type not here, fails the test.
var viewTypes = map[string]reflect.Type{
	"views.Health":           reflect.TypeFor[views.Health](),
	"views.Reason":           reflect.TypeFor[views.Reason](),
	"views.Runtime":          reflect.TypeFor[views.Runtime](),
	"views.RuntimeList":      reflect.TypeFor[views.RuntimeList](),
	"views.Filesystem":       reflect.TypeFor[views.Filesystem](),
	"views.SourceStatus":     reflect.TypeFor[views.SourceStatus](),
	"views.PassSummary":      reflect.TypeFor[views.PassSummary](),
	"views.Status":           reflect.TypeFor[views.Status](),
	"views.Fleet":            reflect.TypeFor[views.Fleet](),
	"views.Replica":          reflect.TypeFor[views.Replica](),
	"views.Problem":          reflect.TypeFor[views.Problem](),
	"views.Release":          reflect.TypeFor[views.Release](),
	"views.ActivityAccepted": reflect.TypeFor[views.ActivityAccepted](),
	"views.ActivityRef":      reflect.TypeFor[views.ActivityRef](),
	"views.Hold":             reflect.TypeFor[views.Hold](),
	"views.Lease":            reflect.TypeFor[views.Lease](),
	"views.Marked":           reflect.TypeFor[views.Marked](),
	"views.Restored":         reflect.TypeFor[views.Restored](),
	"views.Usage":            reflect.TypeFor[views.Usage](),
	"views.Action":           reflect.TypeFor[views.Action](),
	"views.Skipped":          reflect.TypeFor[views.Skipped](),
	"views.Notice":           reflect.TypeFor[views.Notice](),
	"views.Plan":             reflect.TypeFor[views.Plan](),
	"views.Result":           reflect.TypeFor[views.Result](),
	"views.Applied":          reflect.TypeFor[views.Applied](),
	"views.Pass":             reflect.TypeFor[views.Pass](),
	"views.JournalOutcome":   reflect.TypeFor[views.JournalOutcome](),
	"views.JournalEntry":     reflect.TypeFor[views.JournalEntry](),
	"views.Journal":          reflect.TypeFor[views.Journal](),
	"views.Archive":          reflect.TypeFor[views.Archive](),
	"views.PrunePlan":        reflect.TypeFor[views.PrunePlan](),
	"views.PruneApplied":     reflect.TypeFor[views.PruneApplied](),
	"views.Prune":            reflect.TypeFor[views.Prune](),
	"views.NativeReport":     reflect.TypeFor[views.NativeReport](),
	"views.Explain":          reflect.TypeFor[views.Explain](),
	"views.Forecast":         reflect.TypeFor[views.Forecast](),
	"views.UsageHistory":     reflect.TypeFor[views.UsageHistory](),
	"views.UsageSeries":      reflect.TypeFor[views.UsageSeries](),
	"views.UsagePoint":       reflect.TypeFor[views.UsagePoint](),
	"views.Observation":      reflect.TypeFor[views.Observation](),
	"views.Verdict":          reflect.TypeFor[views.Verdict](),
	"views.NextPass":         reflect.TypeFor[views.NextPass](),
	"views.NextStep":         reflect.TypeFor[views.NextStep](),
}

// TestDocumentAndViewsAgree: every schema that names a view describes its
// JSON exactly: the same properties, required exactly when never omitted,
// of the same types, all the way down; and every view has its schema.
func TestDocumentAndViewsAgree(t *testing.T) {
	doc, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	c := &comparer{t: t, schemas: d.Components.Schemas}
	named := map[string]bool{}
	for name, s := range d.Components.Schemas {
		if s.GoType == "" {
			continue
		}
		typ, ok := viewTypes[s.GoType]
		if !ok {
			t.Errorf("schema %s names %s, which is not a view", name, s.GoType)
			continue
		}
		named[s.GoType] = true
		c.compare(name, s, typ)
	}
	for name := range viewTypes {
		if !named[name] {
			t.Errorf("view %s has no schema in api/openapi.yaml", name)
		}
	}
	if c.compared < 30 {
		t.Fatalf("only %d schemas compared", c.compared)
	}
}

type schema struct {
	Ref                  string            `json:"$ref"`
	GoType               string            `json:"x-go-type"`
	Type                 string            `json:"type"`
	Format               string            `json:"format"`
	Required             []string          `json:"required"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties *schema           `json:"additionalProperties"`
}

type comparer struct {
	t        *testing.T
	schemas  map[string]schema
	compared int
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

func (c *comparer) resolve(s schema) (string, schema) {
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		return name, c.schemas[name]
	}
	return "", s
}

func (c *comparer) compare(path string, s schema, typ reflect.Type) {
	c.compared++
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	_, s = c.resolve(s)
	want := func(kind string) {
		if s.Type != kind {
			c.t.Errorf("%s: the document says %q, the view is %s (%s)", path, s.Type, typ, kind)
		}
	}
	switch {
	case typ == timeType:
		want("string")
		if s.Format != "date-time" {
			c.t.Errorf("%s: a time without format date-time", path)
		}
		return
	case typ.Implements(marshalerType):
		if s.Type != "object" && s.Type != "string" {
			c.t.Errorf("%s: %s has its own JSON; the document says %q", path, typ, s.Type)
		}
		return
	}
	switch typ.Kind() {
	case reflect.String:
		want("string")
	case reflect.Bool:
		want("boolean")
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint64, reflect.Uint32:
		want("integer")
	case reflect.Float64:
		want("number")
	case reflect.Slice:
		want("array")
		if s.Items == nil {
			c.t.Errorf("%s: an array without items", path)
			return
		}
		c.compare(path+"[]", *s.Items, typ.Elem())
	case reflect.Map:
		want("object")
		if s.AdditionalProperties == nil {
			c.t.Errorf("%s: a map without additionalProperties", path)
			return
		}
		c.compare(path+"{}", *s.AdditionalProperties, typ.Elem())
	case reflect.Struct:
		want("object")
		fields := jsonFields(typ)
		var names []string
		for name, f := range fields {
			names = append(names, name)
			prop, ok := s.Properties[name]
			if !ok {
				c.t.Errorf("%s: the view has %q, the document does not", path, name)
				continue
			}
			if required := slices.Contains(s.Required, name); required != !f.omitted {
				c.t.Errorf("%s.%s: required %v in the document, but the view omits it %v", path, name, required, f.omitted)
			}
			c.compare(path+"."+name, prop, f.typ)
		}
		for name := range s.Properties {
			if !slices.Contains(names, name) {
				c.t.Errorf("%s: the document has %q, the view does not", path, name)
			}
		}
	default:
		c.t.Errorf("%s: the view's %s has no JSON the test knows", path, typ)
	}
}

type field struct {
	typ     reflect.Type
	omitted bool // omitempty or omitzero: may be absent
}

// jsonFields are the JSON properties of a struct as encoding/json writes
// them, embedded structs flattened.
func jsonFields(typ reflect.Type) map[string]field {
	out := map[string]field{}
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = field{typ: f.Type, omitted: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")}
	}
	return out
}
