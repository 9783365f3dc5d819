package config

import (
	"testing"
	"time"
)

// TestJournalRetention: [server] journal_retention defaults to 90 days,
// is read as a duration, "off" (or "0") keeps everything, and anything
// else under an hour is refused.
func TestJournalRetention(t *testing.T) {
	testEnv(t)
	for doc, want := range map[string]time.Duration{
		"[server]\ninterval = \"5m\"\n":           DefaultJournalRetention,
		"[server]\njournal_retention = \"30d\"\n": 30 * 24 * time.Hour,
		"[server]\njournal_retention = \"1h\"\n":  time.Hour,
		"[server]\njournal_retention = \"off\"\n": 0,
		"[server]\njournal_retention = \"0\"\n":   0,
	} {
		c, _, err := loadDoc(t, doc)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got := c.ServerSettings().JournalRetention; got != want {
			t.Errorf("%q: retention %s, want %s", doc, got, want)
		}
	}
	if DefaultJournalRetention != 90*24*time.Hour {
		t.Errorf("default %s, want 90d (as documented)", DefaultJournalRetention)
	}
	_, path, err := loadDoc(t, "[server]\njournal_retention = \"59m\"\n")
	checkProblems(t, err, path, problem{2, "server.journal_retention", `must be at least an hour, or "off"`})
	_, _, err = loadDoc(t, "[server]\njournal_retention = \"90\"\n")
	if err == nil {
		t.Error(`journal_retention = "90" (no unit) was accepted`)
	}
}
