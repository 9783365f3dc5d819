package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
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

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/reclaimer/reclaimer/internal/dockerclient"
)

// LabelKey marks every container a test makes; its value names the test
// run: "<test name>/<pid>-<random>".
const LabelKey = "reclaimer.test"

// RequireEnv, set to 1, turns a missing Engine from a skip into a failure.
const RequireEnv = "RECLAIMER_REQUIRE_DOCKER"

//go:embed helper/main.go
var helperSource []byte

// Client connects to the Engine, or skips the test (fails it under
// RECLAIMER_REQUIRE_DOCKER=1) when none answers.
func Client(tb testing.TB) *dockerclient.Client {
	tb.Helper()
	c, err := dockerclient.New("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("the Docker Engine does not answer and %s=1: %v", RequireEnv, err)
		}
		tb.Skipf("no Docker Engine (%v); set %s=1 to make this a failure", err, RequireEnv)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

var imageMu sync.Mutex

// Image returns the test image's reference, importing it once: a root
// filesystem holding only /helper (see package helper), built offline.
func Image(tb testing.TB, c *dockerclient.Client) string {
	tb.Helper()
	imageMu.Lock()
	defer imageMu.Unlock()
	sum := sha256.Sum256(append(append([]byte(runtime.Version()), 0), helperSource...))
	ref := "reclaimer-test-helper:" + hex.EncodeToString(sum[:8])
	ctx := context.Background()
	if _, err := c.API().ImageInspect(ctx, ref); err == nil {
		return ref
	}
	dir := tb.TempDir()
	src := filepath.Join(dir, "main.go")
	must(tb, os.WriteFile(src, helperSource, 0o644))
	must(tb, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module helper\n\ngo 1.26\n"), 0o644))
	bin := filepath.Join(dir, "helper")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go" // where this project's machines keep it
	}
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the test helper: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	must(tb, err)
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"tmp/", "home/", "workspace/"} {
		must(tb, tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777}))
	}
	must(tb, tw.WriteHeader(&tar.Header{Name: "helper", Mode: 0o755, Size: int64(len(data))}))
	_, err = tw.Write(data)
	must(tb, err)
	must(tb, tw.Close())
	res, err := c.API().ImageImport(ctx, client.ImageImportSource{Source: &rootfs, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/helper"]`, "LABEL reclaimer.test.image=helper"}})
	if err != nil {
		tb.Fatalf("import the test image: %v", err)
	}
	_, _ = io.Copy(io.Discard, res)
	res.Close()
	if _, err := c.API().ImageInspect(ctx, ref); err != nil {
		tb.Fatalf("the imported test image is not there: %v", err)
	}
	return ref
}

// Run is a test run's own label and the containers it makes.
type Run struct {
	tb     testing.TB
	c      *dockerclient.Client
	image  string
	Label  string // the value of LabelKey for this run
	prefix string
}

// NewRun starts a run: it removes what killed earlier runs of the same
// test left (their process is gone), and removes its own containers when
// the test ends.
func NewRun(tb testing.TB, c *dockerclient.Client) *Run {
	tb.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	prefix := strings.ReplaceAll(tb.Name(), "/", "_") + "/"
	r := &Run{tb: tb, c: c, image: Image(tb, c), prefix: prefix,
		Label: fmt.Sprintf("%s%d-%s", prefix, os.Getpid(), hex.EncodeToString(rnd[:]))}
	r.removeWhere(func(value string) bool {
		rest, ok := strings.CutPrefix(value, prefix)
		if !ok {
			return false
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		return err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	})
	tb.Cleanup(func() { r.removeWhere(func(value string) bool { return value == r.Label }) })
	return r
}

// removeWhere force-removes the containers whose test label value passes
// keep; containers without the test label are never listed.
func (r *Run) removeWhere(match func(value string) bool) {
	ctx := context.Background()
	cs, err := r.c.List(ctx, map[string]string{})
	if err != nil {
		r.tb.Logf("list containers for cleanup: %v", err)
		return
	}
	for _, c := range cs {
		v, ok := c.Labels[LabelKey]
		if !ok || !match(v) {
			continue
		}
		if _, err := r.c.API().ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !dockerclient.IsNotFound(err) {
			r.tb.Logf("remove test container %s: %v", c.Name, err)
		}
	}
}

// Spec describes one container.
type Spec struct {
	Name   string
	Labels map[string]string // added to the run's label
	Binds  []string          // "host:container"
	Args   []string          // helper arguments
	Start  bool
}

// Create makes (and with Start, starts) a container and returns its ID.
// Its name is prefixed with nothing: tests choose unique names.
func (r *Run) Create(s Spec) string {
	r.tb.Helper()
	labels := map[string]string{LabelKey: r.Label}
	for k, v := range s.Labels {
		labels[k] = v
	}
	ctx := context.Background()
	res, err := r.c.API().ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       s.Name,
		Config:     &container.Config{Image: r.image, Cmd: s.Args, Labels: labels},
		HostConfig: &container.HostConfig{Binds: s.Binds},
	})
	if err != nil {
		r.tb.Fatalf("create container %s: %v", s.Name, err)
	}
	if s.Start {
		r.Start(res.ID)
	}
	return res.ID
}

// Start starts a container.
func (r *Run) Start(id string) {
	r.tb.Helper()
	if _, err := r.c.API().ContainerStart(context.Background(), id, client.ContainerStartOptions{}); err != nil {
		r.tb.Fatalf("start container %s: %v", id, err)
	}
}

// Wait waits until the container has exited (the helper finished writing).
func (r *Run) Wait(id string) {
	r.tb.Helper()
	res := r.c.API().ContainerWait(context.Background(), id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case w := <-res.Result:
		if w.StatusCode != 0 {
			r.tb.Fatalf("container %s exited %d", id, w.StatusCode)
		}
	case err := <-res.Error:
		r.tb.Fatalf("wait for container %s: %v", id, err)
	case <-time.After(60 * time.Second):
		r.tb.Fatalf("container %s still running after a minute", id)
	}
}

// Stop stops a container at once.
func (r *Run) Stop(id string) {
	r.tb.Helper()
	if err := r.c.Stop(context.Background(), id, time.Second); err != nil {
		r.tb.Fatal(err)
	}
}

// State returns a container's state ("running", "exited") or "gone".
func (r *Run) State(id string) string {
	r.tb.Helper()
	d, err := r.c.Inspect(context.Background(), id, false)
	if dockerclient.IsNotFound(err) {
		return "gone"
	}
	if err != nil {
		r.tb.Fatal(err)
	}
	return d.State
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
