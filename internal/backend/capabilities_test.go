package backend_test

import (
	"slices"
	"testing"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/agentsandbox"
	"github.com/reclaimer/reclaimer/internal/backend/cloudflare"
	"github.com/reclaimer/reclaimer/internal/backend/daytona"
	"github.com/reclaimer/reclaimer/internal/backend/docker"
	"github.com/reclaimer/reclaimer/internal/backend/e2b"
	"github.com/reclaimer/reclaimer/internal/backend/httpbackend"
	"github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/backend/modal"
	"github.com/reclaimer/reclaimer/internal/backend/openhands"
	"github.com/reclaimer/reclaimer/internal/backend/openhandscloud"
	"github.com/reclaimer/reclaimer/internal/backend/rundir"
	"github.com/reclaimer/reclaimer/internal/backend/worktree"
)

// wrapped is a decorator: As must see through it.
type wrapped struct{ inner backend.Backend }

func (w wrapped) Name() string            { return w.inner.Name() }
func (w wrapped) Unwrap() backend.Backend { return w.inner }

// TestCapabilities pins each backend's exact set of roles: adding or losing
// one is a decision, not an accident.
func TestCapabilities(t *testing.T) {
	local := []string{"Lister", "Deleter", "FileReclaimer", "Exporter", "Restorer"}
	// Remote sandboxes: no files of their own here, no export (a Daytona
	// archive is the provider's cold storage, reached through Deleter).
	remote := []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"}
	// Kubernetes: volumes archived as VolumeSnapshots; without archives
	// (archive = "none") neither Exporter nor Restorer.
	kube := []string{"Lister", "Suspender", "Deleter", "Exporter", "Restorer"}
	kubeNoArchive := []string{"Lister", "Suspender", "Deleter"}
	sandboxes := []string{"Lister", "Suspender", "Deleter", "Exporter", "NativeLifecycle", "Restorer"}
	sandboxesNoArchive := []string{"Lister", "Suspender", "Deleter", "NativeLifecycle"}
	// Modal cannot pause (no Suspender); its archive is a filesystem
	// snapshot, its restore the command that starts a sandbox from it.
	modalRoles := []string{"Lister", "Deleter", "Exporter", "NativeLifecycle", "Restorer"}
	// Cloudflare: a sleep loses files, so no Suspender; persist is the
	// archive, create + hydrate the restore.
	cloudflareRoles := []string{"Lister", "Deleter", "Exporter", "Restorer"}
	containers := []string{"Lister", "Suspender", "Deleter", "FileReclaimer", "Exporter", "Locker", "Restorer", "Watcher"}
	for _, tc := range []struct {
		b    backend.Backend
		want []string
	}{
		{&rundir.Backend{}, local},
		{&worktree.Backend{}, local},
		{wrapped{&rundir.Backend{}}, local},
		{wrapped{wrapped{&worktree.Backend{}}}, local},
		{&e2b.Backend{}, remote},
		{&daytona.Backend{}, remote},
		{httpbackend.With(&httpbackend.Backend{}, map[string]bool{"suspend": true, "delete": true, "lifecycle": true}), remote},
		{httpbackend.With(&httpbackend.Backend{}, nil), []string{"Lister"}},
		{httpbackend.With(&httpbackend.Backend{}, map[string]bool{"delete": true}), []string{"Lister", "Deleter"}},
		{wrapped{&daytona.Backend{}}, remote},
		{&docker.Backend{}, containers},
		{wrapped{&docker.Backend{}}, containers},
		{openhands.New(openhands.Options{}), containers},
		{wrapped{openhands.New(openhands.Options{})}, containers},
		{&kubernetes.Backend{}, kube},
		{&kubernetes.NoArchive{}, kubeNoArchive},
		{wrapped{&kubernetes.Backend{}}, kube},
		{&agentsandbox.Backend{}, sandboxes},
		{&agentsandbox.NoArchive{}, sandboxesNoArchive},
		{&openhandscloud.Backend{}, remote},
		{&modal.Backend{}, modalRoles},
		{wrapped{&modal.Backend{}}, modalRoles},
		{&cloudflare.Backend{}, cloudflareRoles},
	} {
		if got := backend.Capabilities(tc.b); !slices.Equal(got, tc.want) {
			t.Errorf("%T (%s): %v, want %v", tc.b, tc.b.Name(), got, tc.want)
		}
	}
	if _, ok := backend.As[backend.Suspender](&rundir.Backend{}); ok {
		t.Error("a run folder cannot be suspended")
	}
	if l, ok := backend.As[backend.Lister](wrapped{&rundir.Backend{}}); !ok || l == nil {
		t.Error("As does not look through Unwrap")
	}
}

func TestStepOrder(t *testing.T) {
	for i, s := range backend.Steps {
		if s.Rank() != i+1 || !s.Valid() {
			t.Errorf("%s: rank %d", s, s.Rank())
		}
	}
	if backend.Step("reboot").Valid() || backend.StepCaches.Destructive() || !backend.StepArchive.Destructive() {
		t.Error("step predicates wrong")
	}
	for _, st := range []backend.State{backend.StateArchived, backend.StateDeleted, backend.StateMissing} {
		if st.Present() {
			t.Errorf("%s reads as present", st)
		}
	}
	if !backend.StateRunning.Active() || backend.StateStopped.Active() {
		t.Error("Active wrong")
	}
}
