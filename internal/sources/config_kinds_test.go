package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/agentsandbox"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/engine"
)

// TestProviderAndClusterTables: the keys of [[openhands_cloud]], [[modal]],
// [[cloudflare]], [[kubernetes]] and [[agent_sandbox]] reach their
// backends.
func TestProviderAndClusterTables(t *testing.T) {
	testEnv(t)
	kubeconfig := writeKubeconfig(t)
	c := mustLoad(t, `
[[openhands_cloud]]
user_id = "u1"
conversation_tags = { team = "a" }
delete_conversations = true
server_idle_pause = "off"
server_delete = "30d"

[[modal]]
tags = { reclaimer = "agents" }
token_id_env = "MY_MODAL_ID"
snapshot_timeout = "3m"

[[cloudflare]]
endpoint = "https://bridge.example.workers.dev"
account_id = "acc"
application = "sandbox"

[[kubernetes]]
namespace = "runtime-pods"
selector = "app=openhands-runtime"
kubeconfig = "`+kubeconfig+`"
context = "test"
snapshot_timeout = "1m"
archive = "none"

[[agent_sandbox]]
namespace = "sandboxes"
selector = "reclaimer.io/managed=true"
kubeconfig = "`+kubeconfig+`"
`)
	var asked []string
	srcs, err := BuildWith(c, Options{Registered: func(_ context.Context, source, b string) ([]string, error) {
		asked = append(asked, source+" "+b)
		return []string{"sb-1"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer Close(srcs)
	oh := srcs[0].Backend.(*openhandscloud.Backend)
	if oh.UserID != "u1" || oh.ConversationTags["team"] != "a" || !oh.DeleteConversations || oh.ServerIdlePause >= 0 || oh.ServerDelete != 30*24*time.Hour {
		t.Errorf("openhands_cloud: %+v", oh)
	}
	if srcs[0].Name != "openhands_cloud:https://app.all-hands.dev user=u1 team=a" {
		t.Errorf("openhands_cloud name %q", srcs[0].Name)
	}
	m := srcs[1].Backend.(*modal.Backend)
	if m.Tags["reclaimer"] != "agents" || m.SnapshotTimeout != 3*time.Minute || m.Client.Endpoint() != "https://api.modal.com:443" {
		t.Errorf("modal: %+v %s", m, m.Client.Endpoint())
	}
	cf := srcs[2].Backend.(*cloudflare.Backend)
	if cf.Containers == nil || cf.Containers.AccountID != "acc" || cf.Containers.Application != "sandbox" {
		t.Errorf("cloudflare: %+v", cf)
	}
	// The bridge has no list: the names are the source's registrations.
	names, err := cf.Names(context.Background())
	if err != nil || !slices.Equal(names, []string{"sb-1"}) || !slices.Equal(asked, []string{"cloudflare:https://bridge.example.workers.dev cloudflare"}) {
		t.Errorf("cloudflare names %v %v, asked %v", names, err, asked)
	}
	if _, ok := srcs[3].Backend.(*kubernetes.NoArchive); !ok {
		t.Errorf("kubernetes with archive = \"none\": %T", srcs[3].Backend)
	}
	if srcs[3].Name != "kubernetes:test/runtime-pods app=openhands-runtime" {
		t.Errorf("kubernetes name %q", srcs[3].Name)
	}
	if _, ok := srcs[4].Backend.(*agentsandbox.Backend); !ok {
		t.Errorf("agent_sandbox: %T", srcs[4].Backend)
	}
}

// TestUnloadableKubeconfigFailsItsListingOnly: a kubeconfig that does not
// load builds (one bad source never stops the others) and fails its own
// listings, naming the reason, as an unavailable provider.
func TestUnloadableKubeconfigFailsItsListingOnly(t *testing.T) {
	testEnv(t)
	c := mustLoad(t, "[[kubernetes]]\nnamespace = \"ns\"\nselector = \"runtime_id\"\nkubeconfig = \"/nonexistent/kubeconfig\"\n[[dirs]]\nroot = \"/srv/runs\"\n")
	srcs, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	k := srcs[1] // dirs come first in the registry
	if k.Backend.Name() != kubernetes.Name {
		t.Fatalf("%s", k.Backend.Name())
	}
	l, _ := backend.As[backend.Lister](k.Backend)
	_, err = l.List(context.Background(), backend.ListOptions{})
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("listing: %v", err)
	}
}

func TestProviderAndClusterTableErrors(t *testing.T) {
	testEnv(t)
	for _, tt := range []struct{ doc, want string }{
		{"[[kubernetes]]\nnamespace = \"ns\"\n", "kubernetes[0].selector: selector is required"},
		{"[[kubernetes]]\nselector = \"runtime_id\"\n", "kubernetes[0].namespace: namespace is required"},
		{"[[kubernetes]]\nnamespace = \"Not_A_Name\"\nselector = \"a\"\n", "kubernetes[0].namespace"},
		{"[[kubernetes]]\nnamespace = \"ns\"\nselector = \"a in (\"\n", "kubernetes[0].selector"},
		{"[[kubernetes]]\nnamespace = \"ns\"\nselector = \"a\"\narchive = \"tar\"\n", "kubernetes[0].archive"},
		{"[[kubernetes]]\nnamespace = \"ns\"\nselector = \"a\"\nid_label = \"not a label\"\n", "kubernetes[0].id_label"},
		{"[[kubernetes]]\nnamespace = \"ns\"\nselector = \"a\"\nkubeconfig = \"rel/path\"\n", "kubernetes[0].kubeconfig"},
		{"[[agent_sandbox]]\nnamespace = \"ns\"\n", "agent_sandbox[0].selector"},
		{"[[agent_sandbox]]\nnamespace = \"ns\"\nselector = \"a\"\nid_label = \"x\"\n", `unknown key "id_label"`},
		{"[[modal]]\n", "modal[0].tags: is required"},
		{"[[modal]]\ntags = { a = \"b\" }\nendpoint = \"http://api.modal.com\"\n", "plain http is allowed only to a loopback"},
		{"[[modal]]\ntags = { a = \"b\" }\ntoken_secret_env = \"not a name\"\n", "modal[0].token_secret_env"},
		{"[[cloudflare]]\n", "cloudflare[0]: endpoint (the bridge Worker's URL) is required"},
		{"[[cloudflare]]\nendpoint = \"https://b\"\napplication = \"x\"\n", "cloudflare[0].account_id: is required"},
		{"[[openhands_cloud]]\nendpoint = \"http://app.example\"\n", "plain http is allowed only to a loopback"},
		{"[[openhands_cloud]]\napi_key_env = \"X\"\napi_key_file = \"/k\"\n", "not both"},
	} {
		_, _, err := loadDoc(t, tt.doc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.doc, err, tt.want)
		}
	}
}

// closer is a backend holding something to close.
type closer struct{ closed int }

func (c *closer) Name() string { return "x" }
func (c *closer) Close() error { c.closed++; return nil }

type wrapping struct{ inner backend.Backend }

func (w wrapping) Name() string            { return w.inner.Name() }
func (w wrapping) Unwrap() backend.Backend { return w.inner }

// TestCloseClosesWhatBackendsHold: Close reaches a backend's Close through
// decorators, once each.
func TestCloseClosesWhatBackendsHold(t *testing.T) {
	a, b := &closer{}, &closer{}
	if err := Close([]engine.Source{{Backend: a}, {Backend: wrapping{b}}, {Backend: wrapping{&kubernetesless{}}}}); err != nil {
		t.Fatal(err)
	}
	if a.closed != 1 || b.closed != 1 {
		t.Errorf("closed %d and %d times", a.closed, b.closed)
	}
}

type kubernetesless struct{}

func (kubernetesless) Name() string { return "y" }

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	doc := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: "t0123456789"}
contexts:
- name: test
  context: {cluster: c, user: u}
current-context: test
`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
