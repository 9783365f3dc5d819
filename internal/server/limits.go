package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPLimits bound what one client can hold of the daemon. Without them a
// client announcing a body that never comes keeps its connection open past
// every timeout, and enough of them reach the descriptor limit so that
// authorised requests go unanswered. Zero fields take the defaults.
type HTTPLimits struct {
	// ReadHeader bounds reading a request's headers (default 10 s), Read
	// the whole request, body included (default 1 min), Write the
	// handler and the answer (default 15 min: a pass on request runs in
	// it), Idle a kept-alive connection between requests (default 2 min).
	ReadHeader, Read, Write, Idle time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxConns bounds open connections in all (default 512), MaxPerClient
	// those from one address (default 64): past either, a new connection
	// is closed at once, so one client cannot starve the others.
	MaxConns, MaxPerClient int
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.Read, time.Minute)
	def(&l.Write, 15*time.Minute)
	def(&l.Idle, 2*time.Minute)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 512
	}
	if l.MaxPerClient <= 0 {
		l.MaxPerClient = 64
	}
	return l
}

// httpServer is the daemon's HTTP server with its limits.
func (d *Daemon) httpServer(l HTTPLimits) *http.Server {
	l = l.withDefaults()
	return &http.Server{Handler: d.Handler(), ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read,
		WriteTimeout: l.Write, IdleTimeout: l.Idle, MaxHeaderBytes: l.MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}
}

// limitListener closes connections past a total and a per-client count.
type limitListener struct {
	net.Listener
	total, perClient int
	mu               sync.Mutex
	open             int
	byClient         map[string]int
}

func newLimitListener(ln net.Listener, l HTTPLimits) net.Listener {
	l = l.withDefaults()
	return &limitListener{Listener: ln, total: l.MaxConns, perClient: l.MaxPerClient, byClient: map[string]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c)
		l.mu.Lock()
		ok := l.open < l.total && l.byClient[client] < l.perClient
		if ok {
			l.open++
			l.byClient[client]++
		}
		l.mu.Unlock()
		if !ok {
			c.Close() // over the cap: refused at once, no descriptor kept
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.release(client) }}, nil
	}
}

func (l *limitListener) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}

// clientOf is the connection's remote host (a Unix socket's peers share one).
func clientOf(c net.Conn) string {
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		return host
	}
	return c.RemoteAddr().Network()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
