package server

import (
	"strings"
	"testing"

	"github.com/reclaimer/reclaimer/internal/config"
)

// TestChangeLogRedactsCredentials: rule "no configuration message quotes a
// credential", for the reload's change log: a URL holding a password (one
// built in code, past the checks that refuse it in a file) is logged
// redacted, and secrets and their files are hidden.
func TestChangeLogRedactsCredentials(t *testing.T) {
	a, b := config.Default(), config.Default()
	a.Notify = []config.Notify{{URL: "https://hook:hunter2@old.example.com/x", Secret: "s3cret-one"}}
	b.Notify = []config.Notify{{URL: "https://hook:hunter3@new.example.com/x", Secret: "s3cret-two", SecretFile: "/run/s"}}
	changes := strings.Join(configChanges(a, b), "\n")
	if !strings.Contains(changes, "new.example.com") {
		t.Fatalf("the change is not logged:\n%s", changes)
	}
	for _, leak := range []string{"hunter2", "hunter3", "s3cret-one", "s3cret-two"} {
		if strings.Contains(changes, leak) {
			t.Errorf("the change log quotes %q:\n%s", leak, changes)
		}
	}
}
