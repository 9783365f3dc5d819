package sources

import (
	"errors"
	"github.com/reclaimer/reclaimer/internal/config"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error it returns is
// about the content (config.ErrInvalid) and names a line inside the document, and
// that what it accepts validates again.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(example)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	for _, seed := range []string{
		"",
		"[policy]\ndisk_high = \"85%\"\nretention = \"14d\"\n",
		"[[worktrees]]\nrepo = \"/r\"\nroot = \"/w\"\n",
		"worktrees = [{ repo = \"/r\" }, 1]\n",
		"[[dirs]]\nroot = \"~/runs\"\nworkspaces = [\"../x\"]\n",
		"policy.foo.x = 1\n[polcy]\n[[policy]]\n",
		"[policy]\nretention = \n",
		"a = [[[[[[[1]]]]]]]\n",
		"[worktrees.x]\n[[worktrees]]\n[worktrees.policy]\n",
		"\"\\u00e9\" = 1\n",
		"[policy]\ndisk_high = nan\ndisk_low = inf\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		c, err := Parse([]byte(doc), "fuzz.toml")
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a Config and %v", err)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %q does not match config.ErrInvalid", err)
			}
			lines := strings.Count(doc, "\n") + 1
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Line > lines || ce.File != "fuzz.toml" {
				t.Fatalf("error %q names line %d of a %d-line document", err, ce.Line, lines)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a Config that Validate rejects: %v", err)
		}
		for _, s := range c.Sources {
			p := c.PolicyFor(s.Table)
			if p.DiskHigh != 0 && !(p.DiskLow > 0 && p.DiskLow < p.DiskHigh && p.DiskHigh < 1) {
				t.Fatalf("%s: watermarks %v/%v", s.Key(), p.DiskHigh, p.DiskLow)
			}
		}
	})
}
