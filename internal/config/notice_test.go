package config

import (
	"testing"
	"time"
)

// TestNoticeHorizon: [server] notice_horizon defaults to three days, is
// read as a duration, and refuses less than a minute (every undelivered
// notice would be past it before the next sweep).
func TestNoticeHorizon(t *testing.T) {
	testEnv(t)
	c, _, err := loadDoc(t, "[server]\ninterval = \"5m\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ServerSettings().NoticeHorizon; got != 72*time.Hour {
		t.Fatalf("default horizon %s", got)
	}
	c, _, err = loadDoc(t, "[server]\nnotice_horizon = \"7d\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ServerSettings().NoticeHorizon; got != 7*24*time.Hour {
		t.Fatalf("horizon %s, want 7d", got)
	}
	_, path, err := loadDoc(t, "[server]\nnotice_horizon = \"30s\"\n")
	checkProblems(t, err, path, problem{2, "server.notice_horizon", "must be at least a minute"})
}
