package docker

import (
	"testing"

	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

// TestAgentServerFromLabelledPort: a container labelled with its
// agent-server's port is read at the address the host publishes it on,
// with the session key from the variable the other label names; without
// the label, or with the port not published, it has none.
func TestAgentServerFromLabelledPort(t *testing.T) {
	for _, tc := range []struct {
		host, want, key string
		d               dockerclient.Details
	}{
		{"unix:///var/run/docker.sock", "http://127.0.0.1:32768", "sess-1", dockerclient.Details{
			Container: dockerclient.Container{Labels: map[string]string{AgentServerPortLabel: "8000", AgentServerKeyEnvLabel: "SESSION_API_KEY"}},
			Published: map[string]string{"8000": ":32768"}, Env: []string{"PATH=/bin", "SESSION_API_KEY=sess-1"}}},
		{"tcp://10.1.2.3:2376", "http://10.1.2.3:40000", "", dockerclient.Details{
			Container: dockerclient.Container{Labels: map[string]string{AgentServerPortLabel: "8000"}},
			Published: map[string]string{"8000": ":40000"}}},
		{"unix:///var/run/docker.sock", "http://192.168.5.5:40001", "", dockerclient.Details{
			Container: dockerclient.Container{Labels: map[string]string{AgentServerPortLabel: "8000"}},
			Published: map[string]string{"8000": "192.168.5.5:40001"}}},
		{"unix:///var/run/docker.sock", "", "", dockerclient.Details{
			Container: dockerclient.Container{Labels: map[string]string{AgentServerPortLabel: "9000"}},
			Published: map[string]string{"8000": ":40000"}}},
		{"unix:///var/run/docker.sock", "", "", dockerclient.Details{Published: map[string]string{"8000": ":40000"}}},
	} {
		c, err := dockerclient.New(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		b := &Backend{Client: c}
		a := b.agentServer(tc.d)
		switch {
		case tc.want == "" && a != nil:
			t.Errorf("%s %v: %+v, want none", tc.host, tc.d.Labels, a)
		case tc.want != "" && (a == nil || a.URL != tc.want || a.SessionKey != tc.key):
			t.Errorf("%s %v: %+v, want %s", tc.host, tc.d.Labels, a, tc.want)
		}
		c.Close()
	}
}
