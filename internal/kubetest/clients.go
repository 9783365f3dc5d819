package kubetest

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// Resources of the custom kinds the cluster serves.
var (
	Sandboxes       = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	VolumeSnapshots = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	HTTPRoutes      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	crdResource     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

func (c *Cluster) installCRDs() error {
	dyn, err := dynamic.NewForConfig(c.Admin())
	if err != nil {
		return err
	}
	ents, err := crdFiles.ReadDir("crds")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for _, e := range ents {
		data, err := crdFiles.ReadFile(path.Join("crds", e.Name()))
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dyn.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		names = append(names, u.GetName())
	}
	// Established means the API server serves the kind.
	for _, n := range names {
		for {
			u, err := dyn.Resource(crdResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			if hasCondition(conds, "Established") {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w", n, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func hasCondition(conds []any, typ string) bool {
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// RemoveCRD deletes a custom resource definition (a cluster without the
// snapshot API) until the test ends, when it is installed again.
func (c *Cluster) RemoveCRD(t testing.TB, gvr schema.GroupVersionResource) {
	t.Helper()
	dyn := c.AdminDynamic(t)
	ctx := context.Background()
	name := gvr.Resource + "." + gvr.Group
	saved, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	must(t, dyn.Resource(crdResource).Delete(ctx, name, metav1.DeleteOptions{}))
	waitGone(t, func() error { _, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); return err })
	t.Cleanup(func() {
		saved.SetResourceVersion("")
		saved.SetUID("")
		unstructured.RemoveNestedField(saved.Object, "status")
		if _, err := dyn.Resource(crdResource).Create(ctx, saved, metav1.CreateOptions{}); err != nil {
			t.Errorf("reinstall CRD %s: %v", name, err)
			return
		}
		for {
			u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("reinstall CRD %s: %v", name, err)
				return
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			if hasCondition(conds, "Established") {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func waitGone(t testing.TB, get func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := get(); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("object not gone after a minute")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// AdminClient is a typed client with every right.
func (c *Cluster) AdminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Admin())
	must(t, err)
	return cs
}

// AdminDynamic is a dynamic client with every right.
func (c *Cluster) AdminDynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(c.Admin())
	must(t, err)
	return d
}

var nsCount atomic.Int64

// Namespace creates a namespace of its own for the test, deleted when it
// ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsCount.Add(1), strings.ToLower(randomToken()[:6]))
	cs := c.AdminClient(t)
	_, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Client returns a configuration authenticated as a new service account
// of namespace bound to a Role of namespace with exactly rules (and, with
// clusterRules, a ClusterRole too), so a test sees the API server refuse
// whatever the rules do not grant.
func (c *Cluster) Client(t testing.TB, namespace string, rules []rbacv1.PolicyRule, clusterRules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	cs := c.AdminClient(t)
	name := "reclaimer-" + randomToken()[:8]
	_, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}}
	_, err = cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subject}, metav1.CreateOptions{})
	must(t, err)
	if len(clusterRules) > 0 {
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: clusterRules}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, Subjects: subject}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	exp := int64(2 * 3600)
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	must(t, err)
	return c.config(tok.Status.Token)
}

// RoleRules reads the rules of the Role in a manifest file (several YAML
// documents), such as deploy/kubernetes/role.yaml.
func RoleRules(t testing.TB, path string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	for _, doc := range strings.Split(string(data), "\n---") {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if head.Kind != "Role" {
			continue
		}
		var role rbacv1.Role
		if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return role.Rules
	}
	t.Fatalf("%s holds no Role", path)
	return nil
}

// Token is the bearer token of cfg (for a kubeconfig file).
func Token(cfg *rest.Config) string { return cfg.BearerToken }

// MarkPodRunning plays the kubelet: no kubelet runs, so a test marks a pod
// running and ready by writing its status.
func (c *Cluster) MarkPodRunning(t testing.TB, namespace, name string, started time.Time) {
	t.Helper()
	ts := started.UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"phase":"Running","startTime":%q,"conditions":[{"type":"Ready","status":"True","lastTransitionTime":%q},{"type":"ContainersReady","status":"True","lastTransitionTime":%q},{"type":"PodScheduled","status":"True","lastTransitionTime":%q}]}}`,
		ts, ts, ts, ts)
	_, err := c.AdminClient(t).CoreV1().Pods(namespace).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	must(t, err)
}

// MarkSnapshotReady plays the snapshot controller: none runs, so a test
// sets a VolumeSnapshot's status.readyToUse (and its restore size). It
// returns the error rather than failing the test, for a goroutine.
func (c *Cluster) MarkSnapshotReady(ctx context.Context, namespace, name, restoreSize string) error {
	dyn, err := dynamic.NewForConfig(c.Admin())
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"status":{"readyToUse":true,"restoreSize":%q,"creationTime":%q,"boundVolumeSnapshotContentName":"snapcontent-%s"}}`,
		restoreSize, time.Now().UTC().Format(time.RFC3339), name)
	_, err = dyn.Resource(VolumeSnapshots).Namespace(namespace).Patch(ctx, name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}
