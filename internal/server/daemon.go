package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/clock"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/dashboard"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
	"github.com/reclaimer/reclaimer/internal/notify"
	"github.com/reclaimer/reclaimer/internal/ops"
	"github.com/reclaimer/reclaimer/internal/sources"
)

// Options configure a daemon.
type Options struct {
	// ConfigPath is the TOML file; empty uses the defaults (no sources).
	ConfigPath string
	Version    string
	// Logs go here (default os.Stderr).
	Logs io.Writer
	// Signals: SIGTERM and SIGINT stop, SIGHUP reloads. Tests leave it
	// off and use the context and Reload.
	Signals bool
	// Ready, when set, is called with the address once the API listens.
	Ready func(addr string)
	// WrapSources lets tests decorate the configured backends.
	WrapSources func([]engine.Source) []engine.Source
	// Notify tunes webhook delivery (tests shorten the backoff).
	Notify notify.Options
	// ActivityFlush is how often pending activity is written; default 250ms.
	ActivityFlush time.Duration
	// StopTimeout bounds a graceful stop; default 30s.
	StopTimeout time.Duration
	// Clock is the daemon's time: the loop's tick, hold expiry, activity
	// flushing, plan expiry. Default clock.Real; tests drive a clock.Fake.
	Clock clock.Clock
	// Events, when set, is told what the daemon did, as it happens: tests
	// wait on it instead of polling.
	Events func(Event)
	// HTTPLimits bound requests and connections (zero: the defaults).
	HTTPLimits HTTPLimits
}

// Event is something the daemon did, for Options.Events.
type Event struct {
	// Kind is "pass" (a pass or dry run ended; Pass says which),
	// "native" (a sync of provider timers ended), "delivery" (a webhook
	// delivery was journaled), "watch" (an event stream of Source
	// connected), "flush" (pending activity was written, or Err),
	// "stopping" (a stop began), "reload" (a reload ended; Err says
	// whether it took), "outbox" (a sweep of the notices owed to the
	// webhooks offered some, or failed).
	Kind   string
	Pass   *ops.PassReport
	Source string
	// Notices is how many notices an "outbox" sweep offered.
	Notices int
	Err     error
}

// setup is what a configuration makes for the daemon itself, besides the
// application layer's sources and engine; a reload replaces it whole.
type setup struct {
	cfg      *config.Config
	server   config.ServerSettings
	notifier *notify.Notifier
	token    [sha256.Size]byte // of the bearer token
}

// Daemon is a running `reclaimer serve`.
type Daemon struct {
	opts     Options
	log      *slog.Logger
	level    *slog.LevelVar
	stateDir string
	clock    clock.Clock

	app *ops.App
	raw ledger.Store
	// fleet is set when the ledger is PostgreSQL ([ledger] url).
	fleet *fleetRole
	acts  *activityBuffer
	// bg counts background work that uses the ledger (a provider sync
	// after a hold); stop waits for it before closing the ledger.
	bg      sync.WaitGroup
	metrics *metrics
	// outbox delivers the notices the ledger owes the webhooks;
	// outboxCh asks it to look again (coalesced).
	outbox   *notify.Outbox
	outboxCh chan struct{}
	// dash is the dashboard at / (its event streams hear of passes and
	// activity).
	dash *dashboard.Dashboard

	mu  sync.RWMutex
	cur *setup

	stopping atomic.Bool
	stopCh   chan struct{} // closed when a stop begins
	kickCh   chan backend.Key
	fullCh   chan struct{}
	runCtx   context.Context // Serve's, for watchers a reload starts
	// stopWatch ends the event streams in force (guarded by mu).
	stopWatch context.CancelFunc
}

// Run starts a daemon and serves until ctx ends or a stop signal.
func Run(ctx context.Context, opts Options) error {
	d, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	return d.Serve(ctx)
}

// Open reads the configuration, opens the ledger, and finishes what a
// crash left half done; it does not listen yet.
func Open(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Logs == nil {
		opts.Logs = os.Stderr
	}
	if opts.ActivityFlush <= 0 {
		opts.ActivityFlush = 250 * time.Millisecond
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	cfg, err := loadConfig(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, level: new(slog.LevelVar), stateDir: filepath.Dir(cfg.Ledger.Path), clock: opts.Clock,
		stopCh: make(chan struct{}), kickCh: make(chan backend.Key, 1024), fullCh: make(chan struct{}, 1), outboxCh: make(chan struct{}, 1)}
	ss := cfg.ServerSettings()
	d.log = newLogger(opts.Logs, ss.LogFormat, d.level)
	d.level.Set(parseLevel(ss.LogLevel))
	if !config.ListenIsLocal(ss.Listen) && ss.TokenFile == "" {
		return nil, &config.Error{File: opts.ConfigPath, Key: "server.listen",
			Msg: fmt.Sprintf("refusing to listen on %s, which is not loopback, without [server] token_file set explicitly", ss.Listen)}
	}
	var fenced ops.Options
	if cfg.Fleet() {
		if d.fleet, err = d.openFleet(ctx, cfg); err != nil {
			return nil, err
		}
		d.raw = d.fleet.pg
		fenced = ops.Options{Lead: d.fleet.lead, Locker: d.fleet.pg, Fencer: d.fleet.pg, Postgres: d.fleet.pg}
	} else if d.raw, err = sqlite.Open(ctx, cfg.Ledger.Path); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	d.acts = newActivityBuffer(d.raw, d.clock)
	d.metrics = newMetrics(activeHoldsFunc(d.raw, d.clock))
	s, err := d.build(cfg)
	if err != nil {
		d.raw.Close()
		return nil, err
	}
	d.cur = s
	d.app, err = ops.Open(ctx, ops.Options{Config: cfg, Store: pendingStore{Store: d.raw, buf: d.acts},
		WrapSources: opts.WrapSources, Clock: d.clock, Logger: d.log, Activity: d.recordActivity,
		OnProtect: d.syncNativeOf, OnPass: d.onPass, Recover: true, Stop: d.stopCh, SampleUsage: true,
		Lead: fenced.Lead, Locker: fenced.Locker, Fencer: fenced.Fencer, Postgres: fenced.Postgres})
	if err != nil {
		d.closeSetup(s)
		d.raw.Close()
		return nil, err
	}
	d.outbox = &notify.Outbox{Store: d.raw, Scope: engineScope{d.app}, Kinds: outboxKinds, Event: noticeEvent,
		Now: d.clock.Now}
	d.dash = dashboard.New(dashboard.Options{App: d.app, Token: func() [sha256.Size]byte { return d.setupNow().token },
		Clock: d.clock, Version: opts.Version, Logger: d.log, Stop: d.stopCh})
	return d, nil
}

// recordActivity buffers activity reports and tells the dashboard's live
// pages.
func (d *Daemon) recordActivity(ctx context.Context, batch []ledger.Activity) error {
	err := d.acts.record(ctx, batch)
	if err == nil && d.dash != nil {
		d.dash.Publish("activity")
	}
	return err
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		cfg := config.Default()
		return cfg, cfg.ResolvePaths()
	}
	return sources.Load(path)
}

func newLogger(w io.Writer, format string, level *slog.LevelVar) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// build makes the notifier and token of cfg.
func (d *Daemon) build(cfg *config.Config) (*setup, error) {
	s := &setup{cfg: cfg, server: cfg.ServerSettings()}
	tok, err := d.loadToken(s.server.TokenFile)
	if err != nil {
		return nil, err
	}
	s.token = sha256.Sum256(tok)
	var hooks []notify.Hook
	for _, n := range cfg.Notify {
		secret, header, err := n.Secrets()
		if err != nil {
			return nil, err
		}
		hooks = append(hooks, notify.Hook{URL: n.URL, Events: n.Events, Secret: secret, Header: n.Header, HeaderValue: header})
	}
	no := d.opts.Notify
	no.Record = d.recordDelivery
	s.notifier = notify.New(hooks, no)
	return s, nil
}

func (d *Daemon) closeSetup(s *setup) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.notifier.Close(ctx)
}

// TokenFile is where the token is made when [server] token_file is not set.
func (d *Daemon) TokenFile() string { return filepath.Join(d.stateDir, "api.token") }

// App is the daemon's application layer (tests read the engine through it).
func (d *Daemon) App() *ops.App { return d.app }

// loadToken reads the token file, or makes the default one at first start.
func (d *Daemon) loadToken(path string) ([]byte, error) {
	explicit := path != ""
	if !explicit {
		path = d.TokenFile()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("make token: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			tok := rand.Text() + rand.Text()
			_, err = f.WriteString(tok + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(path)
				return nil, fmt.Errorf("make token %s: %w", path, err)
			}
			d.log.Info("made an API token", "file", path)
		} else if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("make token %s: %w", path, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil && explicit && errors.Is(err, fs.ErrNotExist) {
		return nil, d.tokenError(path + " does not exist; " + makeTokenHint(path))
	}
	if err != nil && explicit {
		return nil, d.tokenError(fmt.Sprintf("cannot read it: %v", err))
	}
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 16 && explicit {
		return nil, d.tokenError(path + " holds a token shorter than 16 characters; " + makeTokenHint(path))
	}
	if len(tok) < 16 {
		return nil, fmt.Errorf("read token %s: shorter than 16 characters", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		d.log.Warn("the token file can be read by others; chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
	return []byte(tok), nil
}

// tokenError is a problem with an explicit [server] token_file: the
// configuration's (exit 2), so the operator fixes the file, not the host.
func (d *Daemon) tokenError(msg string) error {
	return &config.Error{File: d.opts.ConfigPath, Key: "server.token_file", Msg: msg}
}

// makeTokenHint says how to make a token file at path.
func makeTokenHint(path string) string {
	return fmt.Sprintf("make one with `(umask 077; head -c 32 /dev/urandom | base64 > %s)`, or leave token_file unset to have one made in the state folder", path)
}

// watchCtx is Serve's context once it runs, else nil.
func (d *Daemon) watchCtx() context.Context {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.runCtx
}

// setupNow returns the daemon's part of the configuration in force.
func (d *Daemon) setupNow() *setup {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cur
}

func (d *Daemon) event(e Event) {
	if d.opts.Events != nil {
		d.opts.Events(e)
	}
}

// Serve listens, runs the loop, and stops gracefully when ctx ends or a
// stop signal comes: no new requests (503), the action in flight finishes,
// acknowledged activity is written, notices get a few seconds.
func (d *Daemon) Serve(ctx context.Context) error {
	s := d.setupNow()
	ln, err := listen(s.server.Listen)
	if err != nil {
		d.closeAll()
		return err
	}
	ln = newLimitListener(ln, d.opts.HTTPLimits)
	srv := d.httpServer(d.opts.HTTPLimits)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	if d.opts.Signals {
		sig := make(chan os.Signal, 2)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(sig)
		go func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case v := <-sig:
					if v == syscall.SIGHUP {
						d.Reload(runCtx)
						continue
					}
					d.log.Info("stopping", "signal", v.String())
					cancelRun()
					return
				}
			}
		}()
	}

	var wg sync.WaitGroup
	actCtx, cancelActs := context.WithCancel(context.Background())
	actsDone := make(chan struct{})
	go func() {
		defer close(actsDone)
		d.acts.run(actCtx, d.opts.ActivityFlush, func(err error) {
			if err != nil {
				d.log.Error("write activity", "err", err)
			}
			d.event(Event{Kind: "flush", Err: err})
		})
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	d.log.Info("serving", "listen", ln.Addr().String(), "interval", s.server.Interval.String(), "sources", len(d.app.Sources()))
	if d.opts.Ready != nil {
		d.opts.Ready(ln.Addr().String())
	}
	d.mu.Lock()
	d.runCtx = runCtx
	d.mu.Unlock()
	wg.Add(4)
	go func() {
		defer wg.Done()
		// Known keys, read once: activity reports then find their runtime
		// without a ledger read each (until this ends, a report of a
		// runtime not known yet reads its record).
		if err := d.app.LoadKeys(runCtx); err != nil && runCtx.Err() == nil {
			d.log.Warn("read the ledger's runtimes for activity reports", "err", err)
		}
	}()
	go func() { defer wg.Done(); d.loop(runCtx) }()
	go func() { defer wg.Done(); d.watch(runCtx) }()
	go func() { defer wg.Done(); d.deliverNotices(runCtx) }()
	// The elector outlives the loop: a stopping leader finishes the
	// action in flight under its term, then resigns, and a follower
	// takes over at once.
	electCtx, stopElector := context.WithCancel(context.Background())
	defer stopElector()
	var fleetWG sync.WaitGroup
	if d.fleet != nil {
		fleetWG.Go(func() { d.fleet.elector.Run(electCtx) })
		fleetWG.Go(func() { d.heartbeats(electCtx) })
	}

	var serveErr error
	select {
	case <-runCtx.Done():
	case serveErr = <-served:
		cancelRun()
	}

	// Stop: refuse new work, let the action in flight finish.
	d.stopping.Store(true)
	close(d.stopCh)
	d.log.Info("stopping: new requests get 503; the action in flight finishes, the rest waits for the next start")
	d.event(Event{Kind: "stopping"})
	stopCtx, cancelStop := context.WithTimeout(context.Background(), d.opts.StopTimeout)
	defer cancelStop()
	if err := srv.Shutdown(stopCtx); err != nil {
		d.log.Warn("stop HTTP server", "err", err)
	}
	wg.Wait()
	d.bg.Wait()
	stopElector()
	fleetWG.Wait()
	cancelActs()
	<-actsDone
	// No request is in flight any more: every acknowledged report is in
	// the buffer, and this is its last write.
	if err := d.acts.flush(stopCtx); err != nil {
		d.log.Error("write activity at stop", "err", err)
	}
	d.closeAll()
	d.log.Info("stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

func (d *Daemon) closeAll() {
	d.closeSetup(d.setupNow())
	if err := d.app.Close(); err != nil {
		d.log.Warn("close", "err", err)
	}
	if err := d.raw.Close(); err != nil {
		d.log.Warn("close ledger", "err", err)
	}
}

// listen opens "host:port" or "unix:/path" (a stale socket is replaced).
func listen(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(p)
		}
		ln, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		if err := os.Chmod(p, 0o660); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
