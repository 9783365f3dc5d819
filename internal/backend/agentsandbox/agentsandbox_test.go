package agentsandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/agentsandbox"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
	"github.com/reclaimer/reclaimer/internal/kubetest"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/native"
	"github.com/reclaimer/reclaimer/internal/plan"
	"github.com/reclaimer/reclaimer/internal/policy"
	"github.com/reclaimer/reclaimer/internal/remote/fakes"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, kubetest.Options{}, &cluster)) }

type env struct {
	c     *kubetest.Cluster
	ns    string
	dyn   dynamic.Interface
	b     backend.Backend
	clock *fakes.Clock
	eng   *engine.Engine
	store ledger.Store
	src   engine.Source
}

// setup makes a namespace and a backend over it with exactly the rights
// of deploy/kubernetes/role.yaml.
func setup(t *testing.T, set policy.Settings, opts agentsandbox.Options) *env {
	t.Helper()
	c := kubetest.Need(t, cluster)
	ns := c.Namespace(t)
	cfg := c.Client(t, ns, kubetest.RoleRules(t, "../../../deploy/kubernetes/role.yaml"))
	client, err := kubeclient.New(kubeclient.Options{Config: cfg, Rate: 1000, Concurrency: 16})
	must(t, err)
	opts.Namespace = ns
	if opts.Selector == "" {
		opts.Selector = "owner=reclaimer-test"
	}
	opts.ReadyTimeout = 5 * time.Second
	b, err := agentsandbox.New(client, opts)
	must(t, err)
	t.Cleanup(func() { b.(interface{ Close() error }).Close() })
	clock := fakes.NewClock(time.Now().UTC().Truncate(time.Second))
	src := engine.Source{Name: "agent_sandbox[0]", Backend: b, Settings: set}
	eng, store := fakes.Engine(t, clock, src)
	return &env{c: c, ns: ns, dyn: c.AdminDynamic(t), b: b, clock: clock, eng: eng, store: store, src: src}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type sbOpts struct {
	state    string // "running", "suspended", "expired", "starting"
	policy   string // shutdownPolicy; "" leaves the default (Retain)
	shutdown time.Time
	volume   bool
	labels   map[string]string
}

// makeSandbox creates a Sandbox and plays the agent-sandbox controller,
// which does not run here: it writes the status conditions the controller
// would and, for a volume, the claim the controller makes from the
// template ("<template>-<sandbox>", owned by the Sandbox).
func (e *env) makeSandbox(t *testing.T, name string, o sbOpts) {
	t.Helper()
	ctx := context.Background()
	lbl := map[string]any{"owner": "reclaimer-test"}
	if o.labels != nil {
		lbl = map[string]any{}
		for k, v := range o.labels {
			lbl[k] = v
		}
	}
	spec := map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "agent", "image": "sandbox"}}}}}
	if o.volume {
		spec["volumeClaimTemplates"] = []any{map[string]any{"metadata": map[string]any{"name": "workspace"},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "5Gi"}}}}}
	}
	if o.state == "suspended" {
		spec["operatingMode"] = "Suspended"
	}
	if o.policy != "" {
		spec["shutdownPolicy"] = o.policy
	}
	if !o.shutdown.IsZero() {
		spec["shutdownTime"] = o.shutdown.UTC().Format(time.RFC3339)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "labels": lbl}, "spec": spec}}
	made, err := e.dyn.Resource(kubetest.Sandboxes).Namespace(e.ns).Create(ctx, u, metav1.CreateOptions{})
	must(t, err)
	now := time.Now().UTC().Format(time.RFC3339)
	var cond map[string]any
	switch o.state {
	case "running":
		cond = map[string]any{"type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "ready", "lastTransitionTime": now}
	case "suspended":
		cond = map[string]any{"type": "Ready", "status": "False", "reason": "SandboxSuspended", "message": "suspended", "lastTransitionTime": now}
	case "expired":
		cond = map[string]any{"type": "Ready", "status": "False", "reason": "SandboxExpired", "message": "expired", "lastTransitionTime": now}
	}
	if cond != nil {
		patch := map[string]any{"status": map[string]any{"conditions": []any{cond}}}
		data, _ := json.Marshal(patch)
		_, err := e.dyn.Resource(kubetest.Sandboxes).Namespace(e.ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		must(t, err)
	}
	if o.volume {
		yes := true
		_, err := e.c.AdminClient(t).CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "workspace-" + name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: name, UID: made.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}}}},
			metav1.CreateOptions{})
		must(t, err)
	}
}

func (e *env) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.dyn.Resource(kubetest.Sandboxes).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	must(t, err)
	return u
}

func (e *env) shutdownTime(t *testing.T, name string) string {
	t.Helper()
	s, _, _ := unstructured.NestedString(e.get(t, name).Object, "spec", "shutdownTime")
	return s
}

func (e *env) mode(t *testing.T, name string) string {
	t.Helper()
	s, _, _ := unstructured.NestedString(e.get(t, name).Object, "spec", "operatingMode")
	return s
}

func (e *env) list(t *testing.T) map[string]backend.Runtime {
	t.Helper()
	l, _ := backend.As[backend.Lister](e.b)
	rts, err := l.List(context.Background(), backend.ListOptions{})
	must(t, err)
	out := map[string]backend.Runtime{}
	for _, rt := range rts {
		out[rt.ID] = rt
	}
	return out
}

// waitListed waits until the backend's cache shows what the test wrote (a
// watch delivers it a moment later).
func (e *env) waitListed(t *testing.T, ok func(map[string]backend.Runtime) bool) map[string]backend.Runtime {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := e.list(t)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing never as wanted: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) pass(t *testing.T) (*plan.Plan, *plan.Applied) {
	t.Helper()
	ctx := context.Background()
	p, w, err := e.eng.Plan(ctx, engine.PlanOptions{})
	must(t, err)
	res, err := e.eng.Apply(ctx, p, engine.ApplyOptions{World: w})
	must(t, err)
	return p, res
}

func (e *env) native(t *testing.T, write bool) *native.Report {
	t.Helper()
	opts := native.Options{Sources: []engine.Source{e.src}, Ledger: e.store, Now: e.clock.Now}
	var rep *native.Report
	var err error
	if write {
		rep, err = native.Sync(context.Background(), opts)
	} else {
		rep, err = native.Plan(context.Background(), opts)
	}
	must(t, err)
	if len(rep.Problems) > 0 {
		t.Fatalf("native problems: %v", rep.Problems)
	}
	return rep
}

func row(rep *native.Report, id string) native.Row {
	for _, r := range rep.Rows {
		if r.Runtime == id {
			return r
		}
	}
	return native.Row{}
}

func setting(r native.Row, name string) native.Setting {
	for _, s := range r.Settings {
		if s.Name == name {
			return s
		}
	}
	return native.Setting{}
}

func TestListStatesAndScope(t *testing.T) {
	e := setup(t, policy.Settings{}, agentsandbox.Options{})
	e.makeSandbox(t, "run", sbOpts{state: "running", volume: true})
	e.makeSandbox(t, "paused", sbOpts{state: "suspended"})
	e.makeSandbox(t, "expired", sbOpts{state: "expired"})
	e.makeSandbox(t, "boot", sbOpts{})
	e.makeSandbox(t, "foreign", sbOpts{state: "running", labels: map[string]string{"owner": "someone-else"}})
	got := e.waitListed(t, func(m map[string]backend.Runtime) bool {
		return len(m) == 4 && m["run"].State == backend.StateRunning && m["expired"].State == backend.StateSuspended
	})
	if got["paused"].State != backend.StateSuspended || got["boot"].State != backend.StateStarting {
		t.Fatalf("states: %+v", got)
	}
	if r := got["run"]; r.StorageBytes != 5<<30 || !strings.Contains(r.Unsaved, "workspace-run") || r.Native == nil || r.Native.DeadlineStep != backend.StepSuspend {
		t.Fatalf("run: %+v", r)
	}
}

// TestIdleSuspendSetsOperatingMode: the idle running Sandbox of the
// selector gets operatingMode Suspended; the others keep theirs.
func TestIdleSuspendSetsOperatingMode(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute}, agentsandbox.Options{})
	e.makeSandbox(t, "idle", sbOpts{state: "running"})
	e.makeSandbox(t, "busy", sbOpts{state: "running"})
	e.makeSandbox(t, "foreign", sbOpts{state: "running", labels: map[string]string{"owner": "other"}})
	e.waitListed(t, func(m map[string]backend.Runtime) bool {
		return m["idle"].State == backend.StateRunning && m["busy"].State == backend.StateRunning
	})
	e.clock.Advance(2 * time.Hour)
	must(t, e.store.RecordActivity(context.Background(), []ledger.Activity{{Key: ledger.Key{Source: "agent_sandbox[0]", Backend: agentsandbox.Name, ID: "busy"}, At: e.clock.Now().Add(-time.Minute)}}))
	p, res := e.pass(t)
	if len(p.Actions) != 1 || p.Actions[0].Runtime != "idle" || p.Actions[0].Step != backend.StepSuspend || res.Results[0].Outcome != plan.Done {
		t.Fatalf("plan %+v, results %+v", p.Actions, res.Results)
	}
	if e.mode(t, "idle") != "Suspended" || e.mode(t, "busy") != "Running" || e.mode(t, "foreign") != "Running" {
		t.Fatalf("modes: idle %s, busy %s, foreign %s", e.mode(t, "idle"), e.mode(t, "busy"), e.mode(t, "foreign"))
	}
}

// TestShutdownTimeDriftReadAndRepaired: native plan shows a shutdownTime
// stricter than idle_suspend wants and one missing; native sync writes
// both, and a second sync finds nothing to do.
func TestShutdownTimeDriftReadAndRepaired(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 2 * time.Hour}, agentsandbox.Options{})
	now := e.clock.Now()
	e.makeSandbox(t, "early", sbOpts{state: "running", shutdown: now.Add(10 * time.Minute)})
	e.makeSandbox(t, "none", sbOpts{state: "running"})
	e.waitListed(t, func(m map[string]backend.Runtime) bool {
		return m["early"].State == backend.StateRunning && m["none"].State == backend.StateRunning
	})
	rep := e.native(t, false)
	if s := setting(row(rep, "early"), backend.TimerDeadline); s.Drift != "stricter" || !strings.HasPrefix(s.Action, "set") {
		t.Fatalf("early: %+v", row(rep, "early"))
	}
	if s := setting(row(rep, "none"), backend.TimerDeadline); s.Drift != "looser" || !strings.HasPrefix(s.Action, "set") {
		t.Fatalf("none: %+v", row(rep, "none"))
	}
	if got := e.shutdownTime(t, "early"); got != now.Add(10*time.Minute).Format(time.RFC3339) {
		t.Fatalf("native plan wrote: %s", got)
	}
	rep = e.native(t, true)
	if rep.Written != 2 || rep.Failed != 0 {
		t.Fatalf("sync: %+v", rep)
	}
	for _, id := range []string{"early", "none"} {
		got, err := time.Parse(time.RFC3339, e.shutdownTime(t, id))
		must(t, err)
		// The last activity the Sandbox shows (its creation, its Ready
		// transition) plus idle_suspend.
		if d := got.Sub(now.Add(2 * time.Hour)); d < -2*time.Minute || d > 2*time.Minute {
			t.Fatalf("%s: shutdownTime %s, want about %s", id, got, now.Add(2*time.Hour))
		}
	}
	e.waitListed(t, func(m map[string]backend.Runtime) bool {
		return m["early"].Native != nil && m["early"].Native.Deadline.After(now.Add(time.Hour))
	})
	if again := e.native(t, true); again.Written != 0 || again.Drifted != 0 {
		t.Fatalf("second sync: %+v", again)
	}
}

// TestLeaseMovesShutdownTime: a lease past the idle deadline moves
// shutdownTime to its end, capped by max_lifetime; a Sandbox whose
// expiry deletes (shutdownPolicy Delete) is only ever extended.
func TestLeaseMovesShutdownTime(t *testing.T) {
	e := setup(t, policy.Settings{IdleSuspend: 30 * time.Minute, MaxLifetime: 24 * time.Hour}, agentsandbox.Options{})
	now := e.clock.Now()
	e.makeSandbox(t, "leased", sbOpts{state: "running", shutdown: now.Add(30 * time.Minute)})
	e.makeSandbox(t, "deletes", sbOpts{state: "running", policy: "Delete", shutdown: now.Add(6 * time.Hour)})
	e.waitListed(t, func(m map[string]backend.Runtime) bool {
		return m["leased"].State == backend.StateRunning && m["deletes"].State == backend.StateRunning
	})
	ctx := context.Background()
	_, err := e.eng.Observe(ctx, engine.ObserveOptions{Record: true, Light: true})
	must(t, err)
	_, err = e.store.Update(ctx, ledger.Key{Source: "agent_sandbox[0]", Backend: agentsandbox.Name, ID: "leased"}, func(r *ledger.RuntimeRecord) error {
		r.LeaseUntil = now.Add(5 * time.Hour)
		return nil
	})
	must(t, err)
	rep := e.native(t, true)
	if got := e.shutdownTime(t, "leased"); got != now.Add(5*time.Hour).Format(time.RFC3339) {
		t.Fatalf("leased: shutdownTime %s, want the lease's end %s (%+v)", got, now.Add(5*time.Hour).Format(time.RFC3339), row(rep, "leased"))
	}
	// The policy wants "deletes" to expire sooner than its owner set:
	// reported, never written.
	if s := setting(row(rep, "deletes"), backend.TimerDeadline); !strings.HasPrefix(s.Action, "report only") {
		t.Fatalf("deletes: %+v", row(rep, "deletes"))
	}
	if got := e.shutdownTime(t, "deletes"); got != now.Add(6*time.Hour).Format(time.RFC3339) {
		t.Fatalf("deletes moved earlier: %s", got)
	}
	// The backend refuses it too, whoever asks.
	nl, _ := backend.As[backend.NativeLifecycle](e.b)
	_, err = nl.Lifecycle(ctx, backend.Runtime{Key: backend.Key{Backend: agentsandbox.Name, ID: "deletes"}},
		backend.LifecycleOptions{Set: &backend.Lifecycle{Deadline: now.Add(time.Hour)}})
	if err == nil || !strings.Contains(err.Error(), "shutdownPolicy is Delete") {
		t.Fatalf("earlier delete deadline: %v", err)
	}
}

// TestRetentionSnapshotsThenDeletesTheSandbox: a suspended Sandbox past
// retention is archived (a VolumeSnapshot of its claim, ready) and
// deleted; its claim goes with it (owner references, the controller
// manager's garbage collector). Without a ready snapshot it stays.
func TestRetentionSnapshotsThenDeletesTheSandbox(t *testing.T) {
	e := setup(t, policy.Settings{Retention: time.Hour, Grace: time.Hour}, agentsandbox.Options{SnapshotTimeout: time.Second})
	e.makeSandbox(t, "old", sbOpts{state: "suspended", volume: true})
	e.waitListed(t, func(m map[string]backend.Runtime) bool { return m["old"].State == backend.StateSuspended })
	e.clock.Advance(3 * time.Hour)
	p, _ := e.pass(t)
	if len(p.Scheduled) != 1 {
		t.Fatalf("no notice: %+v", p)
	}
	e.clock.Advance(2 * time.Hour)
	_, res := e.pass(t)
	if len(res.Results) != 1 || res.Results[0].Outcome != plan.Failed || !strings.Contains(res.Results[0].Reason, "not ready within 1s") {
		t.Fatalf("without a snapshot controller: %+v", res.Results)
	}
	e.get(t, "old") // still there

	// Now play the snapshot controller.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			list, err := e.dyn.Resource(kubetest.VolumeSnapshots).Namespace(e.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, it := range list.Items {
					_ = e.c.MarkSnapshotReady(ctx, e.ns, it.GetName(), "5Gi")
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// The failed archive kept its notice: the next pass is due again.
	_, res = e.pass(t)
	if len(res.Results) != 1 || res.Results[0].Outcome != plan.Done {
		t.Fatalf("with a ready snapshot: %+v", res.Results)
	}
	archives, err := e.store.ListArchives(context.Background(), ledger.Key{Source: "agent_sandbox[0]", Backend: agentsandbox.Name, ID: "old"})
	must(t, err)
	m, err := archive.ParseManifest(archives[0].Manifest)
	must(t, err)
	if len(m.Snapshots) != 1 || m.Snapshots[0].Volume != "workspace-old" {
		t.Fatalf("manifest: %+v", m.Snapshots)
	}
	admin := e.c.AdminClient(t)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := e.dyn.Resource(kubetest.Sandboxes).Namespace(e.ns).Get(context.Background(), "old", metav1.GetOptions{})
		_, perr := admin.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), "workspace-old", metav1.GetOptions{})
		if err != nil && perr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox or claim left: %v %v", err, perr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rs, _ := backend.As[backend.Restorer](e.b)
	where, err := rs.Restore(context.Background(), backend.Key{Backend: agentsandbox.Name, ID: "old"}, backend.RestoreOptions{Manifest: archives[0].Manifest})
	must(t, err)
	if !strings.Contains(where, "workspace-old") {
		t.Fatalf("restore: %s", where)
	}
}
