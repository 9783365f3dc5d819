package sources

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRemoteSources(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, `
[[e2b]]
metadata = { a = "1" }
rate = 5
idle_suspend = "10m"

[[daytona]]
api_key_file = "~/keys/daytona"

[daytona.labels]
"reclaimer.io/pool" = "agents"

[[http]]
endpoint = "http://localhost:9000/x"
token_env = "T"
`)
	e := tables[*E2BTable](c)[0]
	if e.URL() != DefaultE2BEndpoint || e.KeyEnv() != "E2B_API_KEY" || e.Rate == nil || *e.Rate != 5 || !reflect.DeepEqual(e.Metadata, map[string]string{"a": "1"}) {
		t.Errorf("e2b: %+v", e)
	}
	if got := c.PolicyFor(e).IdleSuspend; got != 10*time.Minute {
		t.Errorf("policy override: %v", got)
	}
	d := tables[*DaytonaTable](c)[0]
	if d.KeyEnv() != "" || d.APIKeyFile != "/home/tester/keys/daytona" || d.Labels["reclaimer.io/pool"] != "agents" || d.URL() != DefaultDaytonaEndpoint {
		t.Errorf("daytona: %+v", d)
	}
	if h := tables[*HTTPTable](c)[0]; h.Endpoint != "http://localhost:9000/x" {
		t.Errorf("http: %+v", h)
	}
}

func TestRemoteSourceErrors(t *testing.T) {
	testEnv(t)
	for _, tt := range []struct{ doc, want string }{
		{"[[e2b]]\n", "e2b[0].metadata: is required"},
		{"[[daytona]]\nlabels = {}\n", "daytona[0].labels: is required"},
		{"[[e2b]]\nmetadata = { a = 1 }\n", "e2b[0].metadata.a: want a string"},
		{"[[e2b]]\nmetadata = \"a=1\"\n", "want a table of strings"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\nendpoint = \"http://api.e2b.app\"\n", "plain http is allowed only to a loopback"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\nendpoint = \"https://u:p@api.e2b.app\"\n", "must not hold credentials"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\napi_key_env = \"X\"\napi_key_file = \"/k\"\n", "set api_key_env or api_key_file, not both"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\napi_key_env = \"not a name\"\n", "not an environment variable name"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\nrate = 0\n", "want more than 0"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\nrate = \"fast\"\n", "want a number"},
		{"[[e2b]]\nmetadata = { a = \"1\" }\napi_key = \"secret\"\n", `unknown key "api_key"`},
		{"[[http]]\ntoken_env = \"T\"\n", "http[0]: endpoint is required"},
		{"[[http]]\nendpoint = \"https://x\"\n", "set token_env or token_file"},
		{"[[daytona]]\nlabels = { a = \"b\" }\nretention = \"-1d\"\n", "daytona[0].retention"},
		// Rule "no configuration message quotes a credential": a
		// malformed endpoint holding a password is quoted redacted.
		{"[[http]]\ntoken_env = \"T\"\nendpoint = \"https://u:hunter2@[::1/x\"\n", `"https://[redacted]@[::1/x" is not an http(s) URL`},
		{"[[e2b]]\nmetadata = { a = \"1\" }\nendpoint = \"https://u:hunter2@api.e2b.app?x=1\"\n", "must not hold credentials"},
	} {
		_, _, err := loadDoc(t, tt.doc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.doc, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the message quotes the password: %v", tt.doc, err)
		}
	}
}

func TestRateZeroMeansUnset(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, "[[e2b]]\nmetadata = { a = \"1\" }\n")
	if e := tables[*E2BTable](c)[0]; e.Rate != nil {
		t.Fatal(e.Rate)
	}
}
