package server_test

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/server"
)

// TestSlowClientsCannotStarveTheDaemon: many unauthenticated clients that
// send headers announcing a body that never comes are cut off (a read
// timeout per request, a cap per client), and an authorised request from
// another address is still answered while they try.
func TestSlowClientsCannotStarveTheDaemon(t *testing.T) {
	dir := t.TempDir()
	limits := server.HTTPLimits{ReadHeader: time.Second, Read: time.Second, MaxConns: 64, MaxPerClient: 8}
	h := startDaemon(t, dir, writeConfig(t, dir, "", ""), server.Options{HTTPLimits: limits})
	addr := strings.TrimPrefix(h.url, "http://")
	slow := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	const clients = 150
	conns := make([]net.Conn, 0, clients)
	for range clients {
		c, err := slow.Dial("tcp", addr)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			t.Skipf("cannot dial from 127.0.0.2 (%v): this machine refuses a second loopback address", err)
		}
		conns = append(conns, c)
		io.WriteString(c, "POST /v1/runtimes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// An authorised request from 127.0.0.1 is answered at once.
	start := time.Now()
	resp, err := h.api.GetStatusWithResponse(h.ctx())
	if err != nil || resp.StatusCode() != 200 {
		t.Fatalf("authorised status while %d slow clients wait: %v %v", clients, err, resp)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("authorised status took %v", d)
	}
	// Every slow connection is closed by the server: those over the cap at
	// once, the others when the request's read timeout ends.
	deadline := time.Now().Add(10 * time.Second)
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		_, err := io.ReadAll(c)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != len(conns) {
		t.Fatalf("%d of %d slow connections still open 10 s later (read timeout %v)", len(conns)-closed, len(conns), limits.Read)
	}
}
