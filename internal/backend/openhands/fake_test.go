package openhands_test

import (
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend/openhands/openhandstest"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// agentServer is the agent-server's storage laid out as its code does
// (openhandstest), in a temporary folder.
type agentServer = openhandstest.AgentServer

func newAgentServer(t *testing.T) *agentServer {
	t.Helper()
	return openhandstest.New(t, testtree.Real(t, t.TempDir()))
}
