package sources

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/backend/kubernetes"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/kubeclient"
)

// Kubernetes is [[kubernetes]]: runtimes laid out as OpenHands'
// runtime-api lays them out in a namespace.
var Kubernetes = define("kubernetes", kubernetes.Name,
	"every set of objects of `namespace` matching `selector` and sharing one value of `id_label` (OpenHands' runtime-api layout: a Deployment, its volume, Service, Ingress, ...)",
	func(env *Env, t *KubernetesTable) (backend.Backend, error) {
		c, err := kubeClient(t.Cluster)
		if err != nil {
			return unbuilt{kubernetes.Name, err}, nil
		}
		return kubernetes.New(c, kubernetes.Options{Namespace: t.Namespace, Selector: t.Selector, IDLabel: t.IDLabel,
			SnapshotClass: t.SnapshotClass, SnapshotTimeout: dur(t.SnapshotTimeout), PodGrace: dur(t.PodGrace), Archive: t.Archive})
	})

// Cluster holds the keys both Kubernetes tables share: where the objects
// are and how to reach the API server.
type Cluster struct {
	// Namespace (namespace, required) holds the runtimes; nothing in any
	// other namespace is touched.
	Namespace string `toml:"namespace"`
	// Selector (selector, required) is a label selector every object of a
	// runtime matches ("runtime_id", "app=openhands-runtime"); nothing
	// outside it is touched.
	Selector string `toml:"selector"`
	// Kubeconfig (kubeconfig) is a kubeconfig file. Default: the pod's
	// in-cluster account, else $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string `toml:"kubeconfig"`
	// Context (context) is the kubeconfig's context; default its current
	// one.
	Context string `toml:"context"`
	// Archive (archive) is "snapshot" (default: a VolumeSnapshot of each
	// volume before a removal) or "none" (volumes go without one).
	Archive string `toml:"archive"`
	// SnapshotClass (snapshot_class) is the VolumeSnapshotClass of
	// archives; default the cluster's default class.
	SnapshotClass string `toml:"snapshot_class"`
	// SnapshotTimeout (snapshot_timeout) bounds the wait for a snapshot to
	// be ready; past it nothing is removed. Default "10m".
	SnapshotTimeout *config.Duration `toml:"snapshot_timeout"`
	// Rate (rate) is the requests a second to the API server. Default 20.
	Rate *float64 `toml:"rate"`
}

// KubernetesTable is one [[kubernetes]] table.
type KubernetesTable struct {
	Cluster
	// IDLabel (id_label) groups objects into runtimes: its value is the
	// runtime's ID. Default "runtime_id".
	IDLabel string `toml:"id_label"`
	// PodGrace (pod_grace) bounds the wait for a deleted Deployment's pods
	// to end before its volume is deleted. Default "2m".
	PodGrace *config.Duration `toml:"pod_grace"`

	config.SourceBase
}

// Identity implements config.Table: the cluster, namespace and selector.
func (t *KubernetesTable) Identity() string { return t.Cluster.identity() }

// Describe implements config.Table.
func (t *KubernetesTable) Describe() string { return t.Cluster.describe() }

// Paths implements config.Table.
func (t *KubernetesTable) Paths() []config.Path { return t.Cluster.paths() }

// Check implements config.Table.
func (t *KubernetesTable) Check(c *config.Check) {
	t.Cluster.check(c)
	if t.IDLabel != "" {
		if errs := validation.IsQualifiedName(t.IDLabel); len(errs) > 0 {
			c.Add("id_label", "%q is not a label name: %s", t.IDLabel, strings.Join(errs, "; "))
		}
	}
}

// identity is the context (when set), namespace and selector: two
// clusters' tables with one namespace and selector need names.
func (k *Cluster) identity() string {
	id := k.Namespace + " " + k.Selector
	if k.Context != "" {
		id = k.Context + "/" + id
	}
	return id
}

func (k *Cluster) describe() string {
	s := fmt.Sprintf("namespace = %q, selector = %q", k.Namespace, k.Selector)
	if k.Context != "" {
		s += fmt.Sprintf(", context = %q", k.Context)
	}
	return s
}

func (k *Cluster) paths() []config.Path {
	return []config.Path{credentialPath("kubeconfig", &k.Kubeconfig)}
}

func (k *Cluster) check(c *config.Check) {
	if _, err := kubeclient.ParseScope(k.Namespace, k.Selector); err != nil {
		key := "selector"
		if strings.HasPrefix(err.Error(), "namespace") {
			key = "namespace"
		}
		c.Add(key, "%v", err)
	}
	if _, err := kubeclient.ParseArchive(k.Archive); err != nil {
		c.Add("archive", "%v", err)
	}
	if k.Rate != nil && (*k.Rate <= 0 || *k.Rate > config.MaxRate) {
		c.Add("rate", "%v: want more than 0 and at most %v requests a second", *k.Rate, config.MaxRate)
	}
}

// kubeClient makes the client of one Kubernetes table. It reads the
// kubeconfig (a local file) and sends nothing.
func kubeClient(k Cluster) (*kubeclient.Client, error) {
	r := 0.0
	if k.Rate != nil {
		r = *k.Rate
	}
	return kubeclient.New(kubeclient.Options{Kubeconfig: k.Kubeconfig, Context: k.Context, Rate: r})
}

func dur(d *config.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}

// unbuilt is a source whose client could not be made (a kubeconfig that
// does not load): every listing fails with the reason, so that pass
// reports the source and the other sources run.
type unbuilt struct {
	name string
	err  error
}

func (u unbuilt) Name() string { return u.name }

func (u unbuilt) List(context.Context, backend.ListOptions) ([]backend.Runtime, error) {
	return nil, fmt.Errorf("%w: %w", u.err, backend.ErrUnavailable)
}
