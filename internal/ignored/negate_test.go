package ignored

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseNegations(t *testing.T) {
	t.Parallel()
	data := "# comment\n!# not a comment but no slash\nbuild/\n!build/keep.txt\n\\!build/x\n" +
		"!.gitkeep\n!/top/only\n!dir/only/\n!trailing/space \\ \n!crlf/line\r\n!a//b\n!/\n"
	got := parseNegations("pkg/sub", []byte(data))
	var comps []string
	for _, n := range got {
		comps = append(comps, strings.Join(n.comps, "|"))
	}
	want := []string{
		"pkg|sub|build|keep.txt",
		"pkg|sub|top|only",
		"pkg|sub|dir|only",
		"pkg|sub|trailing|space \\ ",
		"pkg|sub|crlf|line",
		"pkg|sub|a|b",
	}
	if !reflect.DeepEqual(comps, want) {
		t.Errorf("parseNegations:\n got %q\nwant %q", comps, want)
	}
	if got := parseNegations("", []byte("!/x/y")); len(got) != 1 || strings.Join(got[0].comps, "|") != "x|y" {
		t.Errorf("top-level base: %+v", got)
	}
}

func TestReachesInside(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, dir string
		want         bool
	}{
		{"build/keep.txt", "build", true},
		{"build/keep.txt", "build/sub", false},
		{"build/keep.txt", "out", false},
		{"build", "build", false},        // names the directory itself
		{"a/b", "a/b/c", false},          // names a parent
		{"*/keep", "node_modules", true}, // glob component
		{"b[!x]ild/k", "build", true},
		{"b[!u]ild/k", "build", false},
		{"src/**/keep", "src/a/b", true},
		{"**/keep", "anything", true},
		{"[/k", "x", true}, // malformed: err on the side of keeping
		{"pkg/gen/keep", "pkg/gen", true},
		{"pkg/gen/keep", "pkg", true},
	} {
		n := negation{comps: strings.Split(tc.pattern, "/")}
		if got := n.reachesInside(strings.Split(tc.dir, "/")); got != tc.want {
			t.Errorf("!%s reaches inside %s = %v, want %v", tc.pattern, tc.dir, got, tc.want)
		}
	}
}
