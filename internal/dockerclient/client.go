package dockerclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// RequestTimeout bounds each request but the event stream: a hung Engine
// fails the listing (the pass reports it and touches nothing) instead of
// hanging the pass.
const RequestTimeout = time.Minute

// Client talks to one Docker Engine.
type Client struct {
	api   *client.Client
	calls atomic.Int64

	rootMu   sync.Mutex
	dataRoot string // cached: it changes only when the Engine restarts
}

// New connects to the Engine named by host ("unix:///var/run/docker.sock",
// "tcp://host:2376"), or, when host is empty, by DOCKER_HOST or the
// default socket. It makes no request yet.
func New(host string) (*Client, error) {
	c := &Client{}
	opts := []client.Opt{client.FromEnv, client.WithHTTPRequestHook(func(*http.Request) error {
		c.calls.Add(1)
		return nil
	})}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to docker: %w", err)
	}
	c.api = api
	return c, nil
}

// Host is the Engine address in use.
func (c *Client) Host() string { return c.api.DaemonHost() }

// Calls is the number of HTTP requests made to the Engine so far.
func (c *Client) Calls() int64 { return c.calls.Load() }

// Close releases idle connections.
func (c *Client) Close() error { return c.api.Close() }

// API is the underlying moby client, for test helpers that create images
// and containers; the backend itself uses only the methods below.
func (c *Client) API() *client.Client { return c.api }

// IsNotFound tells whether err says the container (or image) does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// Ping checks that the Engine answers.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := c.api.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("ping docker at %s: %w", c.Host(), err)
	}
	return nil
}

// Mount is one mount of a container.
type Mount struct {
	// Type is "bind", "volume", "tmpfs", ...
	Type string
	// Source is the host path of a bind mount (empty for tmpfs); for a
	// volume of the local driver that binds a host folder
	// (`-o type=none,o=bind,device=DIR`), that folder, DIR; for other
	// volumes the Engine's storage location.
	Source      string
	Destination string
	RW          bool
	// Volume is the volume's name, for a volume mount.
	Volume string
	// volumeBind: a volume whose Source is the host folder its device binds.
	volumeBind bool
}

// Bind tells whether m shows a host folder in the container: a bind mount,
// or a volume whose device binds one. Either way the container reads and
// writes that folder, so both count for ownership and busyness.
func (m Mount) Bind() bool {
	return m.Source != "" && (m.Type == string(mount.TypeBind) || m.volumeBind)
}

// Container is what a listing tells of one container.
type Container struct {
	ID      string
	Name    string // without the leading "/"
	State   string // created, running, paused, restarting, removing, exited, dead
	Labels  map[string]string
	Created time.Time
	Mounts  []Mount
}

// Details is what an inspection adds to a listing.
type Details struct {
	Container
	StartedAt  time.Time
	FinishedAt time.Time
	// SizeRw is the size of the writable layer as the Engine measured it
	// (-1 unless asked for: the Engine walks the layer, slowly on some
	// storage drivers).
	SizeRw int64
	// UpperDir is the host folder of the writable layer, for the storage
	// drivers that have one (overlay2, fuse-overlayfs); "" otherwise.
	UpperDir string
	// Published maps a container TCP port ("8000") to where the host
	// publishes it ("127.0.0.1:32768"; an unspecified address as "").
	Published map[string]string
	// Env is the container's environment (NAME=value), as configured.
	Env []string
}

// List returns the containers of the Engine in one request: all of them,
// or with states only those in one of these states ("running", "paused",
// ...). Labels, when set, narrow it on the Engine's side (every pair must
// match); the backend lists all, since whether a host folder is shared
// depends on containers its selector does not match.
func (c *Client) List(ctx context.Context, labels map[string]string, states ...string) ([]Container, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	if len(states) > 0 {
		f.Add("status", states...)
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	vols, err := c.volumeBinds(ctx, res.Items)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Container, 0, len(res.Items))
	for _, s := range res.Items {
		name := ""
		if len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		out = append(out, Container{ID: s.ID, Name: name, State: string(s.State), Labels: s.Labels,
			Created: time.Unix(s.Created, 0).UTC(), Mounts: mounts(s.Mounts, vols)})
	}
	return out, nil
}

// mounts converts the Engine's mounts; vols maps a volume name to the host
// folder its device binds.
func mounts(ms []container.MountPoint, vols map[string]string) []Mount {
	out := make([]Mount, 0, len(ms))
	for _, m := range ms {
		mt := Mount{Type: string(m.Type), Source: m.Source, Destination: m.Destination, RW: m.RW}
		if m.Type == mount.TypeVolume {
			mt.Volume = m.Name
			if dev, ok := vols[m.Name]; ok {
				mt.Source, mt.volumeBind = dev, true
			}
		}
		out = append(out, mt)
	}
	return out
}

// volumeBinds maps the name of every local volume that binds a host folder
// (`--driver local -o type=none -o o=bind -o device=DIR`) to DIR, in one
// request, made only when some container mounts a volume. A listing the
// Engine refuses fails the caller: a folder used through a volume we could
// not read must not look unowned.
func (c *Client) volumeBinds(ctx context.Context, cs []container.Summary) (map[string]string, error) {
	need := false
	for _, s := range cs {
		for _, m := range s.Mounts {
			need = need || m.Type == mount.TypeVolume
		}
	}
	if !need {
		return nil, nil
	}
	res, err := c.api.VolumeList(ctx, client.VolumeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	out := map[string]string{}
	for _, v := range res.Items {
		if dev, ok := BindDevice(v.Driver, v.Options); ok {
			out[v.Name] = dev
		}
	}
	return out, nil
}

// BindDevice tells whether a volume of driver with these options binds a
// host folder, and which: the local driver with o=bind (or rbind) among its
// mount options and an absolute device.
func BindDevice(driver string, opts map[string]string) (string, bool) {
	if driver != "local" || !filepath.IsAbs(opts["device"]) {
		return "", false
	}
	for _, o := range strings.Split(opts["o"], ",") {
		if o = strings.TrimSpace(o); o == "bind" || o == "rbind" {
			return filepath.Clean(opts["device"]), true
		}
	}
	return "", false
}

// Inspect returns one container's details; with size, the Engine also
// measures its writable layer (a walk of the layer: ask only where needed).
func (c *Client) Inspect(ctx context.Context, id string, size bool) (Details, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	res, err := c.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{Size: size})
	if err != nil {
		return Details{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	r := res.Container
	vols, err := c.volumeBinds(ctx, []container.Summary{{Mounts: r.Mounts}})
	if err != nil {
		return Details{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	d := Details{Container: Container{ID: r.ID, Name: strings.TrimPrefix(r.Name, "/"), Mounts: mounts(r.Mounts, vols)}, SizeRw: -1}
	if r.Config != nil {
		d.Labels = r.Config.Labels
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Created); err == nil {
		d.Created = t.UTC()
	}
	if s := r.State; s != nil {
		d.State = string(s.Status)
		d.StartedAt = parseTime(s.StartedAt)
		d.FinishedAt = parseTime(s.FinishedAt)
	}
	if r.SizeRw != nil {
		d.SizeRw = *r.SizeRw
	}
	if r.GraphDriver != nil {
		d.UpperDir = r.GraphDriver.Data["UpperDir"]
	}
	if r.Config != nil {
		d.Env = r.Config.Env
	}
	if r.NetworkSettings != nil {
		for p, bs := range r.NetworkSettings.Ports {
			if p.Proto() != "tcp" || len(bs) == 0 || bs[0].HostPort == "" {
				continue
			}
			if d.Published == nil {
				d.Published = map[string]string{}
			}
			host := ""
			if ip := bs[0].HostIP; ip.IsValid() && !ip.IsUnspecified() {
				host = ip.String()
			}
			d.Published[p.Port()] = net.JoinHostPort(host, bs[0].HostPort)
		}
	}
	return d, nil
}

// parseTime reads an Engine timestamp; the zero time ("0001-01-01...")
// and garbage both come back zero.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t.UTC()
}

// Stop stops a running container, waiting up to timeout for it to exit
// before the Engine kills it. Stopping a stopped container is not an error.
func (c *Client) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout.Round(time.Second) / time.Second)
	ctx, cancel := context.WithTimeout(ctx, timeout+RequestTimeout)
	defer cancel()
	if _, err := c.api.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// Remove removes a stopped container with its anonymous volumes. It never
// forces: a container that started meanwhile is refused by the Engine.
func (c *Client) Remove(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := c.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{RemoveVolumes: true}); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// DataRoot is the Engine's data root (where writable layers live), asked
// once per Client.
func (c *Client) DataRoot(ctx context.Context) (string, error) {
	c.rootMu.Lock()
	defer c.rootMu.Unlock()
	if c.dataRoot != "" {
		return c.dataRoot, nil
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	res, err := c.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("docker info: %w", err)
	}
	if res.Info.DockerRootDir == "" {
		return "", errors.New("docker info: the Engine names no data root")
	}
	c.dataRoot = res.Info.DockerRootDir
	return c.dataRoot, nil
}

// Event is one container event.
type Event struct {
	ID     string
	Name   string
	Action string // "die", "stop", ...
	Labels map[string]string
}

// Events streams the container events whose action is one of actions and
// whose labels match, calling fn for each, until ctx ends or the stream
// fails; it returns that error (ctx.Err() when ctx ended).
func (c *Client) Events(ctx context.Context, labels map[string]string, actions []string, fn func(Event)) error {
	f := client.Filters{}
	f.Add("type", "container")
	f.Add("event", actions...)
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := c.api.Events(ctx, client.EventsListOptions{Filters: f})
	for {
		select {
		case m := <-res.Messages:
			attrs := m.Actor.Attributes
			fn(Event{ID: m.Actor.ID, Name: attrs["name"], Action: string(m.Action), Labels: attrs})
		case err := <-res.Err:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil {
				err = errors.New("stream ended")
			}
			return fmt.Errorf("docker events: %w", err)
		}
	}
}
