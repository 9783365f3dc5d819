package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/reclaimer/reclaimer/internal/backend"
)

// Defaults of Options: a cluster's API server takes more than a SaaS
// provider, but it is shared with everything else running there.
const (
	DefaultRate        = 20.0
	DefaultConcurrency = 8
)

// Options say which cluster to talk to and how hard.
type Options struct {
	// Kubeconfig is a kubeconfig file; empty: in-cluster when running in
	// a pod, else $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context; empty: its current context.
	Context string
	// Rate is the requests a second (burst: twice that); Concurrency the
	// requests in flight (watches, which stay open, are not counted).
	Rate        float64
	Concurrency int
	// Config, when set, is used instead of loading one (tests).
	Config *rest.Config
	// Log, when set, receives client-go's own messages (an informer's
	// failed watch and its retries), which otherwise go to standard error
	// in klog's format. It is process-wide: the last client's wins.
	Log *slog.Logger
}

// Client is a typed and a dynamic client over one bounded transport.
type Client struct {
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
	host    string
	sent    atomic.Int64
}

// New loads the configuration and builds the clients; it sends nothing.
func New(opts Options) (*Client, error) {
	cfg, err := load(opts)
	if err != nil {
		return nil, err
	}
	if opts.Rate < 0 || opts.Concurrency < 0 {
		return nil, errors.New("kubernetes client: negative rate or concurrency")
	}
	if opts.Rate == 0 {
		opts.Rate = DefaultRate
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Log != nil {
		klog.SetSlogLogger(opts.Log)
	}
	c := &Client{host: cfg.Host}
	cfg.QPS, cfg.Burst = float32(opts.Rate), max(1, int(2*opts.Rate))
	cfg.UserAgent = "reclaimer"
	slots := make(chan struct{}, opts.Concurrency)
	inner := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return &bounded{rt: rt, slots: slots, sent: &c.sent}
	}
	if c.Typed, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

func load(opts Options) (*rest.Config, error) {
	if opts.Config != nil {
		return rest.CopyConfig(opts.Config), nil
	}
	if opts.Kubeconfig == "" && opts.Context == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("kubernetes in-cluster configuration: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: opts.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes configuration: %w", err)
	}
	return cfg, nil
}

// Sent is how many requests reached the transport (watches included).
func (c *Client) Sent() int64 { return c.sent.Load() }

// Host is the API server's URL, for messages.
func (c *Client) Host() string { return c.host }

// Serves tells whether the API server serves resource gvr (a custom
// resource whose definition may not be installed).
func (c *Client) Serves(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.Typed.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// bounded caps the requests in flight and counts them. A watch stays
// open for minutes: it is counted but takes no slot.
type bounded struct {
	rt    http.RoundTripper
	slots chan struct{}
	sent  *atomic.Int64
}

func (b *bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	if req.URL.Query().Get("watch") == "true" {
		return b.rt.RoundTrip(req)
	}
	select {
	case b.slots <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	defer func() { <-b.slots }()
	return b.rt.RoundTrip(req)
}

// Classify wraps an API error into backend's categories, saying what was
// refused: not found → backend.ErrNotFound, conflict → backend.ErrConflict,
// forbidden → backend.ErrProtected with the verb and resource the account
// lacks.
func Classify(verb, what string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %s: %w", verb, what, backend.ErrNotFound)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s %s: %v: %w", verb, what, err, backend.ErrConflict)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s %s: the API server does not accept the credentials (%v): %w", verb, what, err, backend.ErrProtected)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s %s: the account may not (%s); grant it in its Role (deploy/kubernetes/role.yaml): %w",
			verb, what, forbiddenText(err), backend.ErrProtected)
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}

// forbiddenText is the API server's reason, which names the user, verb
// and resource.
func forbiddenText(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		msg := st.Status().Message
		if i := strings.Index(msg, "User "); i >= 0 {
			return msg[i:]
		}
		return msg
	}
	return err.Error()
}
