package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// RequireEnv, set to 1, turns missing cluster programs from a skip into a
// failure (CI sets it).
const RequireEnv = "RECLAIMER_REQUIRE_KUBERNETES"

// Programs are the binaries a cluster needs, as tools/kube/build installs
// them.
var Programs = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// Options shape a cluster.
type Options struct {
	// NoControllerManager leaves the controller manager out: nothing makes
	// a Deployment's pods or collects owned objects (a benchmark that
	// measures only the API server).
	NoControllerManager bool
}

// Cluster is a running control plane.
type Cluster struct {
	dir        string
	pki        pki
	etcdURL    string
	apiAddr    string // 127.0.0.1:PORT
	adminToken string
	kcmToken   string
	opts       Options

	mu   sync.Mutex
	api  *proc
	etcd *proc
	kcm  *proc

	spawn chan spawnReq
}

// skipReason says why Main started no cluster.
var skipReason string

// Main starts the package's cluster into *c, runs the tests and stops it;
// TestMain returns its result to os.Exit. Without the programs *c stays nil
// and every test calling Need skips (or fails under RequireEnv).
func Main(m *testing.M, opts Options, c **Cluster) int {
	missing := missingPrograms()
	if len(missing) > 0 {
		skipReason = fmt.Sprintf("the test cluster's programs are not installed (%s; tools/kube/build installs them)",
			strings.Join(missing, ", "))
		if os.Getenv(RequireEnv) == "1" {
			fmt.Fprintf(os.Stderr, "FAIL: %s, and %s=1\n", skipReason, RequireEnv)
			return 1
		}
		return m.Run()
	}
	cl, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start the test cluster: %v\n", err)
		return 1
	}
	*c = cl
	code := m.Run()
	cl.Stop()
	return code
}

// Need returns c, or skips the test with the reason the cluster is not
// there (failing it under RequireEnv).
func Need(t testing.TB, c *Cluster) *Cluster {
	t.Helper()
	if c != nil {
		return c
	}
	msg := skipReason
	if msg == "" {
		msg = "no test cluster (TestMain did not call kubetest.Main)"
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s, and %s=1", msg, RequireEnv)
	}
	t.Skip(msg + "; skipping the tests against a real API server")
	return nil
}

func missingPrograms() []string {
	var missing []string
	for _, p := range Programs {
		if testtree.ToolPath(p) == "" {
			missing = append(missing, p)
		}
	}
	return missing
}

// Start starts etcd, the API server and (unless opts say not) the
// controller manager on loopback, and installs the CRDs.
func Start(opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "reclaimer-kubetest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, opts: opts, spawn: make(chan spawnReq)}
	go c.spawner()
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start() error {
	var err error
	if c.pki, err = writePKI(c.dir); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	c.adminToken, c.kcmToken = randomToken(), randomToken()
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,system:kube-controller-manager,kcm-uid,system:masters\n",
		c.adminToken, c.kcmToken)
	if err := os.WriteFile(filepath.Join(c.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	if err := c.startEtcd(); err != nil {
		return err
	}
	if err := c.StartAPIServer(); err != nil {
		return err
	}
	if err := c.installCRDs(); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	if !c.opts.NoControllerManager {
		if err := c.startControllerManager(); err != nil {
			return err
		}
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) startEtcd() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		client, perr := freePort()
		peer, perr2 := freePort()
		if perr != nil || perr2 != nil {
			return errors.Join(perr, perr2)
		}
		c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
		var p *proc
		p, err = c.run("etcd", "etcd.log",
			"--name=kubetest", "--data-dir="+filepath.Join(c.dir, "etcd"),
			"--listen-client-urls="+c.etcdURL, "--advertise-client-urls="+c.etcdURL,
			"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=kubetest="+peerURL, "--log-level=error",
			// A test's data need not survive a power cut.
			"--unsafe-no-fsync")
		if err != nil {
			return err
		}
		if err = waitHTTP(nil, c.etcdURL+"/health", "", p, 30*time.Second); err == nil {
			c.etcd = p
			return nil
		}
		p.stop()
	}
	return fmt.Errorf("etcd did not start: %w", err)
}

// StartAPIServer starts the API server (again, after StopAPIServer: on the
// same address, with the same etcd, so clients reconnect to it).
func (c *Cluster) StartAPIServer() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if c.apiAddr == "" || attempt > 0 {
			port, perr := freePort()
			if perr != nil {
				return perr
			}
			c.apiAddr = "127.0.0.1:" + strconv.Itoa(port)
		}
		_, port, _ := net.SplitHostPort(c.apiAddr)
		var p *proc
		p, err = c.run("kube-apiserver", "kube-apiserver.log",
			"--etcd-servers="+c.etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port="+port, "--cert-dir="+filepath.Join(c.dir, "certs"),
			"--tls-cert-file="+c.pki.certFile, "--tls-private-key-file="+c.pki.keyFile,
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file="+c.pki.saPub, "--service-account-signing-key-file="+c.pki.saKeyFile,
			"--service-cluster-ip-range=10.0.0.0/16", "--authorization-mode=RBAC",
			"--token-auth-file="+filepath.Join(c.dir, "tokens.csv"),
			// No token controller runs: service-account tokens come from
			// the TokenRequest API.
			"--disable-admission-plugins=ServiceAccount",
			"--enable-priority-and-fairness=false",
			// No kubernetes Service endpoints for a loopback address.
			"--endpoint-reconciler-type=none",
			"--profiling=false", "--v=0")
		if err != nil {
			return err
		}
		if err = waitHTTP(c.pki.caPEM, "https://"+c.apiAddr+"/readyz", c.adminToken, p, 90*time.Second); err == nil {
			c.mu.Lock()
			c.api = p
			c.mu.Unlock()
			return nil
		}
		p.stop()
		if !strings.Contains(p.logTail(), "address already in use") {
			break
		}
	}
	return fmt.Errorf("kube-apiserver did not start: %w", err)
}

// StopAPIServer stops the API server (SIGTERM, then SIGKILL after 10 s);
// etcd keeps the objects.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	p := c.api
	c.api = nil
	c.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

func (c *Cluster) startControllerManager() error {
	kubeconfig := filepath.Join(c.dir, "kcm.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, c.kcmToken); err != nil {
		return err
	}
	p, err := c.run("kube-controller-manager", "kube-controller-manager.log",
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		// What makes objects behave as in a cluster, without nodes.
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,"+
			"persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,namespace-controller",
		"--concurrent-gc-syncs=4", "--v=0")
	if err != nil {
		return err
	}
	c.kcm = p
	return nil
}

// Stop stops every process and removes the cluster's folder.
func (c *Cluster) Stop() {
	for _, p := range []*proc{c.kcm} {
		if p != nil {
			p.stop()
		}
	}
	c.StopAPIServer()
	if c.etcd != nil {
		c.etcd.stop()
	}
	os.RemoveAll(c.dir)
}

// Host is the API server's URL.
func (c *Cluster) Host() string { return "https://" + c.apiAddr }

// Admin is a client configuration with every right (system:masters).
func (c *Cluster) Admin() *rest.Config { return c.config(c.adminToken) }

func (c *Cluster) config(token string) *rest.Config {
	return &rest.Config{Host: c.Host(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		QPS:             -1, // tests are not rate-limited by the client
	}
}

// WriteKubeconfig writes a kubeconfig file for token at path, with one
// context named "kubetest".
func (c *Cluster) WriteKubeconfig(path, token string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: kubetest
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: kubetest
current-context: kubetest
`, c.Host(), c.pki.caFile, token)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// proc is one running program.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// spawner starts every process from one locked OS thread: a parent-death
// signal fires when the thread that started the process exits, so the
// thread must live as long as the test binary.
func (c *Cluster) spawner() {
	runtime.LockOSThread()
	for r := range c.spawn {
		r.done <- r.cmd.Start()
	}
}

func (c *Cluster) run(program, logName string, args ...string) (*proc, error) {
	bin := testtree.ToolPath(program)
	if bin == "" {
		return nil, fmt.Errorf("%s is not installed (tools/kube/build)", program)
	}
	logPath := filepath.Join(c.dir, logName)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done := make(chan error)
	c.spawn <- spawnReq{cmd, done}
	if err := <-done; err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", program, err)
	}
	p := &proc{name: program, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *proc) logTail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// waitHTTP polls url until it answers 200, the process exits or the time
// runs out: polling is the only way to know a child process is ready.
func waitHTTP(caPEM []byte, url, token string, p *proc, limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if caPEM != nil {
		cfg := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		client.Transport = rt
	}
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %s", p.name, p.logTail())
		default:
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s (last answer: %s): %s", p.name, limit, last, p.logTail())
}
