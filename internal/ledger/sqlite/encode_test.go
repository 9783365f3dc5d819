package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzPlainStrings checks the fast path against encoding/json: whatever
// plainStrings accepts, json.Unmarshal must decode to the same value.
func FuzzPlainStrings(f *testing.F) {
	for _, seed := range []string{
		`[]`, `{}`, `["/a","/b c"]`, `{"k":"v","x":""}`, `["a\"b"]`, `["\u003c"]`,
		`[ "a" ]`, `["a",]`, `{"k"}`, `{"k":"v":"w"}`, `["a""b"]`, "[\"\x01\"]", `["é"]`, "[\"\xff\"]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if list, ok := plainStrings(s, '[', ']'); ok {
			var want []string
			if err := json.Unmarshal([]byte(s), &want); err != nil {
				t.Fatalf("plainStrings accepted %q, which is not a JSON list: %v", s, err)
			}
			if len(want) == 0 {
				want = nil
			}
			if !reflect.DeepEqual(list, want) {
				t.Fatalf("plainStrings(%q) = %q, json says %q", s, list, want)
			}
		}
		if pairs, ok := plainStrings(s, '{', '}'); ok {
			var want map[string]string
			if err := json.Unmarshal([]byte(s), &want); err != nil {
				t.Fatalf("plainStrings accepted %q, which is not a JSON object: %v", s, err)
			}
			got := map[string]string{}
			for i := 0; i < len(pairs); i += 2 {
				got[pairs[i]] = pairs[i+1]
			}
			if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("plainStrings(%q) = %q, json says %q", s, got, want)
			}
		}
	})
}

// TestJSONColumnsRoundTrip writes values that need escapes (and so take the
// encoding/json path) and values that do not, and reads them back.
func TestJSONColumnsRoundTrip(t *testing.T) {
	for _, list := range [][]string{
		nil, {"/plain/path"}, {"with \"quotes\"", `back\slash`, "new\nline", "<html>&", "日本語", ""},
	} {
		enc, err := jsonList(list)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fromJSONStrings(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, list) {
			t.Errorf("list %q read back as %q", list, got)
		}
	}
	for _, m := range []map[string]string{
		nil, {"a": "b"}, {"q\"": "\\", "tab\t": "<>", "": "empty key", "ü": ""},
	} {
		enc, err := jsonMap(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fromJSONMap(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("map %q read back as %q", m, got)
		}
	}
}
