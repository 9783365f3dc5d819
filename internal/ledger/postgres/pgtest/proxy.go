package pgtest

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Proxy forwards connections from a socket of its own to the server's, and
// can stop them the ways a network does: Pause holds every byte (a
// partition: a client's queries hang until its deadline), Cut drops every
// connection and refuses new ones (PostgreSQL down). Restore undoes both.
type Proxy struct {
	// Dir holds the proxy's socket; URLFor(Dir, name) reaches database
	// name through it.
	Dir string

	target string
	ln     net.Listener

	mu     sync.Mutex
	paused bool
	cut    bool
	resume chan struct{} // closed by Restore
	conns  map[net.Conn]bool
}

// NewProxy starts a proxy to the server, closed when the test ends.
func (s *Server) NewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	// A short folder of its own: a socket path must fit in 108 bytes,
	// which a test's TempDir (named after the test) may not.
	dir, err := os.MkdirTemp("", "pgproxy-")
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatal(err)
	}
	p := &Proxy{Dir: dir, target: filepath.Join(s.Dir, ".s.PGSQL.5432"), ln: ln,
		resume: make(chan struct{}), conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() { defer close(done); p.serve() }()
	tb.Cleanup(func() {
		ln.Close()
		<-done
		p.Restore() // releases writers held by a pause
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		os.RemoveAll(dir)
	})
	return p
}

// URL is the URL of database name through the proxy.
func (p *Proxy) URL(name string) string { return URLFor(p.Dir, name) }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		if !cut {
			p.conns[c] = true
		}
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.Dial("unix", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[server] = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil { // EOF, a cut, or a closed side: both ends go
				client.Close()
				server.Close()
				return
			}
		}
	}
	wg.Add(2)
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// gate waits while the proxy is paused.
func (p *Proxy) gate() {
	p.mu.Lock()
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	if paused {
		<-resume
	}
}

// Pause holds every byte in both directions until Restore.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets bytes flow and connections in again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}
