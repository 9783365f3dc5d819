package kubernetes_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	kbackend "github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
)

// TestListStatesAndScope: a runtime is every object sharing one value of
// the id label inside the selector and namespace; what lies outside either
// is never listed, whatever its labels.
func TestListStatesAndScope(t *testing.T) {
	e := setup(t, policy.Settings{}, nil, kbackend.Options{})
	e.makeRuntime(t, "run", rtOpts{replicas: 1, running: true})
	e.makeRuntime(t, "boot", rtOpts{replicas: 1})
	e.makeRuntime(t, "paused", rtOpts{replicas: 0})
	e.makeRuntime(t, "foreign", rtOpts{replicas: 0, labels: map[string]string{"app": "something-else"}})
	other := setupIn(t, e.c, e.c.Namespace(t), policy.Settings{}, nil, kbackend.Options{})
	other.makeRuntime(t, "elsewhere", rtOpts{replicas: 0})

	got := e.waitListed(t, "run", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	all := e.list(t)
	if len(all) != 3 || all["boot"].State != backend.StateStarting || all["paused"].State != backend.StateSuspended {
		t.Fatalf("listing: %v", states(all))
	}
	if got.StorageBytes != 10<<30 || !strings.Contains(got.Unsaved, "runtime-run-pvc") {
		t.Errorf("run: storage %d, unsaved %q", got.StorageBytes, got.Unsaved)
	}
	if got.CreatedAt.IsZero() || got.LastActivity.Before(got.CreatedAt) || got.Labels["runtime_id"] != "run" {
		t.Errorf("run: created %v, last activity %v, labels %v", got.CreatedAt, got.LastActivity, got.Labels)
	}
	// A listing by ID reads the API server and agrees with the caches.
	l, _ := backend.As[backend.Lister](e.b)
	fresh, err := l.List(context.Background(), backend.ListOptions{IDs: []string{"paused", "foreign", "elsewhere", "no-such"}})
	must(t, err)
	if len(fresh) != 1 || fresh[0].ID != "paused" || fresh[0].Fingerprint != all["paused"].Fingerprint {
		t.Fatalf("fresh listing: %+v", fresh)
	}
}

func states(m map[string]backend.Runtime) map[string]backend.State {
	out := map[string]backend.State{}
	for id, rt := range m {
		out[id] = rt.State
	}
	return out
}

// TestIdleSuspendScalesToZeroKeepingTheVolume: only the idle running
// runtime of the selector is suspended (its Deployment at 0 replicas
// through /scale); its volume and every other object stay. A runtime with
// recent activity in the ledger, and one outside the selector, stay up.
func TestIdleSuspendScalesToZeroKeepingTheVolume(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil, kbackend.Options{})
	e.makeRuntime(t, "idle", rtOpts{replicas: 1, running: true})
	e.makeRuntime(t, "busy", rtOpts{replicas: 1, running: true})
	e.makeRuntime(t, "foreign", rtOpts{replicas: 1, running: true, labels: map[string]string{"app": "other"}})
	e.waitListed(t, "busy", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	e.waitListed(t, "idle", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	e.clock.Advance(2 * time.Hour)
	must(t, e.store.RecordActivity(context.Background(), []ledger.Activity{{Key: key("busy"), At: e.clock.Now().Add(-5 * time.Minute)}}))

	before := e.client.Sent()
	p, res := e.pass(t)
	if got := actionsOf(p); len(got) != 1 || got["idle"] != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	// Two re-observations (3 requests each), the suspend's own read of the
	// Deployment and its scale: the pass costs a few requests per action,
	// none per runtime it leaves alone.
	if n := e.client.Sent() - before; n > 10 {
		t.Errorf("a pass suspending one runtime sent %d requests", n)
	} else {
		t.Logf("a pass suspending one runtime of three sent %d requests", n)
	}
	if r := outcome(res, "idle"); r.Outcome != plan.Done {
		t.Fatalf("apply: %+v", r)
	}
	if e.replicas(t, "idle") != 0 || e.replicas(t, "busy") != 1 || e.replicas(t, "foreign") != 1 {
		t.Fatalf("replicas: idle %d, busy %d, foreign %d", e.replicas(t, "idle"), e.replicas(t, "busy"), e.replicas(t, "foreign"))
	}
	if got := e.objects(t, "idle"); !maps.Equal(got, allKinds) {
		t.Fatalf("suspend changed the runtime's objects: %s", fmtKinds(got))
	}
	e.waitListed(t, "idle", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateSuspended })
}

// TestMaxLifetimeSuspendsARunningRuntime: the lifetime cap suspends even a
// runtime with fresh activity; it counts from the current run's start.
func TestMaxLifetimeSuspendsARunningRuntime(t *testing.T) {
	e := setup(t, policy.Settings{MaxLifetime: 12 * time.Hour}, nil, kbackend.Options{})
	e.makeRuntime(t, "long", rtOpts{replicas: 1, running: true})
	e.waitListed(t, "long", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	e.clock.Advance(13 * time.Hour)
	must(t, e.store.RecordActivity(context.Background(), []ledger.Activity{{Key: key("long"), At: e.clock.Now().Add(-time.Minute)}}))
	p, res := e.pass(t)
	if got := actionsOf(p); got["long"] != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}
	if r := outcome(res, "long"); r.Outcome != plan.Done || e.replicas(t, "long") != 0 {
		t.Fatalf("apply: %+v, replicas %d", r, e.replicas(t, "long"))
	}
}

// TestPinnedLeasedHeldUntouched: protected runtimes keep running and keep
// every object, past idle_suspend and retention.
func TestPinnedLeasedHeldUntouched(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, Retention: time.Hour}, nil, kbackend.Options{})
	for _, id := range []string{"pinned", "leased", "held"} {
		e.makeRuntime(t, id, rtOpts{replicas: 1, running: true})
		e.waitListed(t, id, func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	}
	ctx := context.Background()
	_, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true})
	must(t, err)
	e.clock.Advance(48 * time.Hour)
	now := e.clock.Now()
	_, err = e.store.Update(ctx, key("pinned"), func(r *ledger.RuntimeRecord) error { r.Pinned, r.PinReason = true, "demo"; return nil })
	must(t, err)
	_, err = e.store.Update(ctx, key("leased"), func(r *ledger.RuntimeRecord) error { r.LeaseUntil = now.Add(time.Hour); return nil })
	must(t, err)
	_, err = e.store.TakeHold(ctx, ledger.HoldRequest{Key: key("held"), Holder: "agent-7", TTL: time.Hour, Now: now})
	must(t, err)
	for range 2 {
		p, _ := e.pass(t)
		if len(p.Actions) != 0 || len(p.Scheduled) != 0 {
			t.Fatalf("acted on protected runtimes: %+v %+v", p.Actions, p.Scheduled)
		}
		e.clock.Advance(time.Minute)
	}
	for _, id := range []string{"pinned", "leased", "held"} {
		if e.replicas(t, id) != 1 || !maps.Equal(e.objects(t, id), allKinds) {
			t.Errorf("%s changed: replicas %d, objects %s", id, e.replicas(t, id), fmtKinds(e.objects(t, id)))
		}
	}
}

// retire takes a suspended runtime through retention: a notice at the
// first pass, the archive and deletion at the next one past the grace.
func (e *env) retire(t *testing.T, id string) plan.Result {
	t.Helper()
	e.waitListed(t, id, func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateSuspended })
	e.clock.Advance(3 * time.Hour)
	p, _ := e.pass(t)
	if len(p.Scheduled) != 1 || p.Scheduled[0].Runtime != id {
		t.Fatalf("first pass: want a notice for %s: scheduled %+v, actions %+v, skipped %+v", id, p.Scheduled, p.Actions, p.Skipped)
	}
	// With archive = "none" the backend cannot archive: retention is a
	// delete, announced and named as one (never "archived").
	want := backend.StepArchive
	if !backend.CanArchive(e.b) {
		want = backend.StepDelete
	}
	if p.Scheduled[0].Step != want {
		t.Fatalf("first pass: notice of %s, want %s", p.Scheduled[0].Step, want)
	}
	e.clock.Advance(2 * time.Hour)
	p, res := e.pass(t)
	if got := actionsOf(p); got[id] != want {
		t.Fatalf("second pass: want a %s of %s: %+v, skipped %+v", want, id, p.Actions, p.Skipped)
	}
	return outcome(res, id)
}

var retention = policy.Settings{Retention: time.Hour, Grace: time.Hour}

// TestRetentionSnapshotsWaitsThenDeletesEverything: retention takes a
// VolumeSnapshot of the volume, waits until it is ready, records it in the
// archive's manifest, then deletes every object of the runtime, the volume
// last; the snapshot stays, and restore makes a new claim from it.
func TestRetentionSnapshotsWaitsThenDeletesEverything(t *testing.T) {
	e := setup(t, retention, nil, kbackend.Options{})
	e.playSnapshotController(t)
	e.makeRuntime(t, "old", rtOpts{replicas: 0})
	e.makeRuntime(t, "kept", rtOpts{replicas: 1, running: true})

	r := e.retire(t, "old")
	if r.Outcome != plan.Done || r.ArchiveID == "" {
		t.Fatalf("retention: %+v", r)
	}
	e.waitGone(t, "old")
	if got := e.objects(t, "kept"); !maps.Equal(got, allKinds) {
		t.Fatalf("the running runtime changed: %s", fmtKinds(got))
	}
	ctx := context.Background()
	archives, err := e.store.ListArchives(ctx, key("old"))
	must(t, err)
	if len(archives) != 1 {
		t.Fatalf("archives: %+v", archives)
	}
	m, err := archive.ParseManifest(archives[0].Manifest)
	must(t, err)
	if len(m.Snapshots) != 1 || m.Snapshots[0].Volume != "runtime-old-pvc" || m.Snapshots[0].RestoreSize != "10Gi" {
		t.Fatalf("manifest snapshots: %+v", m.Snapshots)
	}
	snap, err := e.c.AdminDynamic(t).Resource(kubetest.VolumeSnapshots).Namespace(e.ns).Get(ctx, m.Snapshots[0].Name, metav1.GetOptions{})
	must(t, err)
	if snap.GetAnnotations()[kubeclient.RuntimeAnnotation] != "old" {
		t.Fatalf("snapshot annotations: %v", snap.GetAnnotations())
	}

	rs, _ := backend.As[backend.Restorer](e.b)
	where, err := rs.Restore(ctx, backend.Key{Backend: kbackend.Name, ID: "old"}, backend.RestoreOptions{Manifest: archives[0].Manifest})
	must(t, err)
	if !strings.Contains(where, "runtime-old-pvc") {
		t.Fatalf("restore said %q", where)
	}
	pvc, err := e.admin.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "runtime-old-pvc", metav1.GetOptions{})
	must(t, err)
	if ds := pvc.Spec.DataSource; ds == nil || ds.Kind != "VolumeSnapshot" || ds.Name != m.Snapshots[0].Name {
		t.Fatalf("restored claim's data source: %+v", pvc.Spec.DataSource)
	}
	// Restoring again never replaces the claim.
	if _, err := rs.Restore(ctx, backend.Key{Backend: kbackend.Name, ID: "old"}, backend.RestoreOptions{Manifest: archives[0].Manifest}); !errors.Is(err, backend.ErrConflict) {
		t.Fatalf("second restore: %v", err)
	}
}

// TestSnapshotNeverReadyKeepsEverything: no snapshot controller marks the
// snapshot ready: after snapshot_timeout the archive fails, every object of
// the runtime stays, and the snapshot taken is deleted again.
func TestSnapshotNeverReadyKeepsEverything(t *testing.T) {
	e := setup(t, retention, nil, kbackend.Options{SnapshotTimeout: time.Second})
	e.makeRuntime(t, "old", rtOpts{replicas: 0})
	r := e.retire(t, "old")
	if r.Outcome != plan.Failed || !strings.Contains(r.Reason, "not ready within 1s") || !strings.Contains(r.Reason, "nothing was removed") {
		t.Fatalf("want a failed archive that says why: %+v", r)
	}
	if got := e.objects(t, "old"); !maps.Equal(got, allKinds) {
		t.Fatalf("objects after a failed archive: %s", fmtKinds(got))
	}
	snaps, err := e.c.AdminDynamic(t).Resource(kubetest.VolumeSnapshots).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	if len(snaps.Items) != 0 {
		t.Fatalf("the failed export left %d snapshots", len(snaps.Items))
	}
	notices, err := e.store.ListNotices(context.Background(), ledger.NoticeFilter{Key: key("old")})
	must(t, err)
	if !hasNotice(notices, "failed") {
		t.Fatalf("no failed notice: %+v", notices)
	}
}

func hasNotice(ns []ledger.Notice, kind string) bool {
	for _, n := range ns {
		if n.Kind == kind {
			return true
		}
	}
	return false
}

// TestNoSnapshotAPIKeepsEverything: a cluster without the VolumeSnapshot
// API cannot archive the volume, so retention keeps the runtime and says
// why; archive = "none" deletes it without a snapshot.
func TestNoSnapshotAPIKeepsEverything(t *testing.T) {
	e := setup(t, retention, nil, kbackend.Options{})
	e.c.RemoveCRD(t, kubetest.VolumeSnapshots)
	e.makeRuntime(t, "old", rtOpts{replicas: 0})
	r := e.retire(t, "old")
	if r.Outcome != plan.Failed || !strings.Contains(r.Reason, "serves no VolumeSnapshot API") {
		t.Fatalf("want a failed archive that says why: %+v", r)
	}
	if got := e.objects(t, "old"); !maps.Equal(got, allKinds) {
		t.Fatalf("objects: %s", fmtKinds(got))
	}

	none := setupIn(t, e.c, e.ns, retention, nil, kbackend.Options{Archive: kbackend.ArchiveNone})
	if got := backend.Capabilities(none.b); strings.Join(got, ",") != "Lister,Suspender,Deleter" {
		t.Fatalf("archive = none capabilities: %v", got)
	}
	r = none.retire(t, "old")
	if r.Outcome != plan.Done {
		t.Fatalf("archive = none: %+v", r)
	}
	e.waitGone(t, "old")
}

// TestVolumeUsedByAPodIsReportedNotForced: a pod outside the runtime (a
// debugging pod, no runtime label) mounting its volume stops the deletion
// before anything goes; nothing is forced. Once it is gone, the next pass
// finishes.
func TestVolumeUsedByAPodIsReportedNotForced(t *testing.T) {
	e := setup(t, retention, nil, kbackend.Options{Archive: kbackend.ArchiveNone})
	e.makeRuntime(t, "old", rtOpts{replicas: 0})
	ctx := context.Background()
	_, err := e.admin.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debug"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "w", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "runtime-old-pvc"}}}}}}, metav1.CreateOptions{})
	must(t, err)
	r := e.retire(t, "old")
	if r.Outcome != plan.Failed || !strings.Contains(r.Reason, "runtime-old-pvc is used by pod debug") || !strings.Contains(r.Reason, "nothing deleted") {
		t.Fatalf("want the volume's user reported: %+v", r)
	}
	if got := e.objects(t, "old"); !maps.Equal(got, allKinds) {
		t.Fatalf("objects: %s", fmtKinds(got))
	}
	must(t, e.admin.CoreV1().Pods(e.ns).Delete(ctx, "debug", metav1.DeleteOptions{}))
	// The failure withdrew the notice: announced again, then due.
	e.pass(t)
	e.clock.Advance(2 * time.Hour)
	p, res := e.pass(t)
	if got := actionsOf(p); got["old"] != backend.StepDelete || outcome(res, "old").Outcome != plan.Done {
		t.Fatalf("after the pod went: %+v %+v scheduled %+v skipped %+v", p.Actions, res.Results, p.Scheduled, p.Skipped)
	}
	e.waitGone(t, "old")
}

// TestAnotherRuntimesPodMountingTheVolumeMakesItBusy: seen at plan time
// through the caches, the runtime is busy and not acted on.
func TestAnotherRuntimesPodMountingTheVolumeMakesItBusy(t *testing.T) {
	e := setup(t, retention, nil, kbackend.Options{Archive: kbackend.ArchiveNone})
	e.makeRuntime(t, "old", rtOpts{replicas: 0})
	_, err := e.admin.CoreV1().Pods(e.ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"app": "openhands-runtime", "runtime_id": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "w", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "runtime-old-pvc"}}}}}}, metav1.CreateOptions{})
	must(t, err)
	rt := e.waitListed(t, "old", func(rt backend.Runtime, ok bool) bool { return ok && rt.Busy != "" })
	if !strings.Contains(rt.Busy, "used by pod other") {
		t.Fatalf("busy: %q", rt.Busy)
	}
	e.clock.Advance(3 * time.Hour)
	p, _ := e.pass(t)
	if _, ok := actionsOf(p)["old"]; ok {
		t.Fatalf("acted on a busy runtime: %+v", p.Actions)
	}
}

// TestAPIServerRestartingMidPass: the API server stops between plan and
// apply. Apply's re-observation fails for each action (nothing is done, no
// crash), a listing meanwhile fails with the reason, and once the server
// is back the caches heal and the next pass acts.
func TestAPIServerRestartingMidPass(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil, kbackend.Options{ReadyTimeout: 2 * time.Second})
	e.makeRuntime(t, "idle", rtOpts{replicas: 1, running: true})
	e.waitListed(t, "idle", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	e.clock.Advance(2 * time.Hour)
	ctx := context.Background()
	p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
	must(t, err)
	if actionsOf(p)["idle"] != backend.StepSuspend {
		t.Fatalf("plan: %+v", p.Actions)
	}

	e.c.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			must(t, e.c.StartAPIServer())
		}
	}()
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	must(t, err)
	if r := outcome(res, "idle"); r.Outcome != plan.Failed || !strings.Contains(r.Reason, "re-observe") || !strings.Contains(r.Reason, "connection refused") {
		t.Fatalf("apply with the API server down: %+v", r)
	}
	l, _ := backend.As[backend.Lister](e.b)
	if _, err := l.List(ctx, backend.ListOptions{}); err == nil {
		// The caches may still be marked healthy if no watch noticed yet;
		// a fresh listing cannot succeed.
		if _, err := l.List(ctx, backend.ListOptions{IDs: []string{"idle"}}); err == nil {
			t.Fatal("a fresh listing succeeded with the API server down")
		}
	}

	must(t, e.c.StartAPIServer())
	restarted = true
	if e.replicas(t, "idle") != 1 {
		t.Fatal("the runtime was scaled while the API server was down")
	}
	var res2 *plan.Applied
	e.waitFor(t, "a pass after the restart", func() bool {
		p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
		if err != nil || actionsOf(p)["idle"] != backend.StepSuspend {
			return false
		}
		res2, err = e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
		return err == nil && outcome(res2, "idle").Outcome == plan.Done
	})
	if e.replicas(t, "idle") != 0 {
		t.Fatal("not suspended after the restart")
	}
}

// TestMissingVerbIsAClearProblem: an account whose Role lacks a verb gets
// an error naming what was refused, never a crash, and nothing changes.
func TestMissingVerbIsAClearProblem(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	rules := roleRules(t)
	// Everything but patching deployments/scale.
	var noScale = rules[:0:0]
	for _, r := range rules {
		if len(r.Resources) == 1 && r.Resources[0] == "deployments/scale" {
			continue
		}
		noScale = append(noScale, r)
	}
	e := setupIn(t, c, ns, policy.Settings{IdleSuspend: 30 * time.Minute}, c.Client(t, ns, noScale), kbackend.Options{})
	e.makeRuntime(t, "idle", rtOpts{replicas: 1, running: true})
	e.waitListed(t, "idle", func(rt backend.Runtime, ok bool) bool { return ok && rt.State == backend.StateRunning })
	e.clock.Advance(2 * time.Hour)
	_, res := e.pass(t)
	r := outcome(res, "idle")
	if r.Outcome != plan.Failed || !strings.Contains(r.Reason, "may not") || !strings.Contains(r.Reason, "deployments/scale") {
		t.Fatalf("want a refusal naming the verb: %+v", r)
	}
	if e.replicas(t, "idle") != 1 {
		t.Fatal("scaled without the right")
	}

	// Without list on pods the source is reported, loudly, at once.
	var noPods = rules[:0:0]
	for _, r := range rules {
		if len(r.Resources) > 0 && r.Resources[0] == "pods" {
			continue
		}
		noPods = append(noPods, r)
	}
	blind := setupIn(t, c, ns, policy.Settings{IdleSuspend: 30 * time.Minute}, c.Client(t, ns, noPods), kbackend.Options{ReadyTimeout: time.Minute})
	l, _ := backend.As[backend.Lister](blind.b)
	start := time.Now()
	_, err := l.List(context.Background(), backend.ListOptions{})
	if !errors.Is(err, backend.ErrProtected) || !strings.Contains(err.Error(), "pods") || time.Since(start) > 30*time.Second {
		t.Fatalf("listing without list pods: %v (after %s)", err, time.Since(start))
	}
	p, _, err := blind.eng.Plan(context.Background(), engine.PlanOptions{})
	must(t, err)
	if len(p.Problems) == 0 || p.Problems[0].Code != plan.SourceUnreadable || !strings.Contains(p.Problems[0].Message, "may not") {
		t.Fatalf("the plan does not report the source: %+v", p.Problems)
	}
}

// TestKubeconfigAndContext: the client is built from a kubeconfig file and
// a named context, and an unknown context is refused when built.
func TestKubeconfigAndContext(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	path := t.TempDir() + "/kubeconfig"
	must(t, c.WriteKubeconfig(path, kubetest.Token(c.Client(t, ns, roleRules(t)))))
	client, err := kubeclient.New(kubeclient.Options{Kubeconfig: path, Context: "kubetest"})
	must(t, err)
	b, err := kbackend.New(client, kbackend.Options{Namespace: ns, Selector: selector})
	must(t, err)
	defer b.(interface{ Close() error }).Close()
	l, _ := backend.As[backend.Lister](b)
	if _, err := l.List(context.Background(), backend.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kubeclient.New(kubeclient.Options{Kubeconfig: path, Context: "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown context: %v", err)
	}
	for _, o := range []kbackend.Options{{Selector: selector}, {Namespace: ns}, {Namespace: ns, Selector: "a in ("}, {Namespace: ns, Selector: selector, Archive: "tar"}} {
		if _, err := kbackend.New(client, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// TestUnchangedPassSendsNoRequest: once the caches are filled, listing an
// unchanged cluster costs nothing.
func TestUnchangedPassSendsNoRequest(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, nil, kbackend.Options{})
	for _, id := range []string{"a", "b", "c"} {
		e.makeRuntime(t, id, rtOpts{replicas: 0})
	}
	e.waitListed(t, "c", func(_ backend.Runtime, ok bool) bool { return ok })
	before := e.client.Sent()
	for range 3 {
		e.pass(t)
	}
	if n := e.client.Sent() - before; n != 0 {
		t.Fatalf("%d requests for 3 passes over an unchanged cluster", n)
	}
}

// roleRules are the rules of deploy/kubernetes/role.yaml.
func roleRules(t testing.TB) []rbacv1.PolicyRule {
	t.Helper()
	return kubetest.RoleRules(t, "../../../deploy/kubernetes/role.yaml")
}

// TestDeployManifestsAreValid: the API server accepts every object of
// deploy/kubernetes (a server-side dry run: validated, admitted, not
// stored).
func TestDeployManifestsAreValid(t *testing.T) {
	c := kubetest.Need(t, cluster)
	ctx := context.Background()
	admin := c.AdminClient(t)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "runtime-pods"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), "runtime-pods", metav1.DeleteOptions{})
	})
	resources := map[string]schema.GroupVersionResource{
		"ServiceAccount":        {Version: "v1", Resource: "serviceaccounts"},
		"ConfigMap":             {Version: "v1", Resource: "configmaps"},
		"PersistentVolumeClaim": {Version: "v1", Resource: "persistentvolumeclaims"},
		"Service":               {Version: "v1", Resource: "services"},
		"Deployment":            {Group: "apps", Version: "v1", Resource: "deployments"},
		"Role":                  {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	dyn := c.AdminDynamic(t)
	seen := map[string]bool{}
	for _, file := range []string{"role.yaml", "deployment.yaml"} {
		data, err := os.ReadFile("../../../deploy/kubernetes/" + file)
		must(t, err)
		for _, doc := range strings.Split(string(data), "\n---") {
			var obj map[string]any
			must(t, yaml.Unmarshal([]byte(doc), &obj))
			u := &unstructured.Unstructured{Object: obj}
			gvr, ok := resources[u.GetKind()]
			if !ok {
				t.Fatalf("%s: unexpected kind %q", file, u.GetKind())
			}
			if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
			}
			seen[u.GetKind()] = true
		}
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "Deployment"} {
		if !seen[k] {
			t.Errorf("deploy/kubernetes has no %s", k)
		}
	}
}
