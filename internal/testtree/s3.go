package testtree

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// RequireS3Env, set to 1, turns a missing S3 test server from a skip into
// a failure (CI sets it).
const RequireS3Env = "RECLAIMER_REQUIRE_S3"

// S3Server is a real S3-compatible server (versitygw with its POSIX
// backend) on loopback, for one test.
type S3Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Host      string // 127.0.0.1:PORT
	AccessKey string
	SecretKey string
	// Root is the POSIX backend's folder: bucket B's object K is the file
	// Root/B/K, which a test may damage on purpose.
	Root string
}

// ToolPath finds a test tool's binary (versitygw, kube-apiserver) on PATH
// or in GOPATH/bin, where .ci/run installs them; "" when it is in neither.
func ToolPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// StartS3 starts versitygw for the test and stops it when the test ends.
// Without the binary the test is skipped, or fails when RequireS3Env is 1.
func StartS3(tb testing.TB) *S3Server {
	tb.Helper()
	bin := ToolPath("versitygw")
	if bin == "" {
		msg := "versitygw is not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
		if os.Getenv(RequireS3Env) == "1" {
			tb.Fatalf("%s, and %s=1", msg, RequireS3Env)
		}
		tb.Skip(msg + "; skipping the tests against a real S3 server")
	}
	root := filepath.Join(tb.TempDir(), "s3")
	must(tb, os.MkdirAll(root, 0o755))
	s := &S3Server{AccessKey: "reclaimer-test", SecretKey: "reclaimer-test-secret", Root: root}
	for attempt := 0; ; attempt++ {
		// Pick a free port; another process may take it before versitygw
		// binds it, in which case versitygw exits and we try again.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(tb, err)
		s.Host = l.Addr().String()
		l.Close()
		s.Endpoint = "http://" + s.Host
		cmd := exec.Command(bin, "--port", s.Host, "posix", root)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
		var logs strings.Builder
		cmd.Stdout, cmd.Stderr = &lockedWriter{w: &logs}, &lockedWriter{w: &logs}
		must(tb, cmd.Start())
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		tb.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		if waitListening(s.Host, exited) {
			return s
		}
		if attempt == 2 {
			tb.Fatalf("versitygw did not start:\n%s", logs.String())
		}
	}
}

// waitListening polls until host accepts connections, the process exits,
// or 30 s pass. Polling is the only way to know a child process is ready.
func waitListening(host string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", host, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// MakeBucket creates a bucket through the S3 API.
func (s *S3Server) MakeBucket(tb testing.TB, name string) {
	tb.Helper()
	c, err := minio.New(s.Host, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")})
	must(tb, err)
	must(tb, c.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}))
}

// ObjectPath is the file holding an object in the POSIX backend.
func (s *S3Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Root, bucket, filepath.FromSlash(key))
}

// CutProxy forwards loopback TCP connections to a target and, once armed,
// drops every connection after it has carried a number of bytes from the
// client: an upload cut off in the middle.
type CutProxy struct {
	Host   string // 127.0.0.1:PORT to dial instead of the target
	budget atomic.Int64
	cuts   atomic.Int64
}

// StartCutProxy listens on loopback and forwards to target until the test
// ends. It forwards without limit until Cut is called.
func StartCutProxy(tb testing.TB, target string) *CutProxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(tb, err)
	p := &CutProxy{Host: l.Addr().String()}
	p.budget.Store(-1)
	var wg sync.WaitGroup
	tb.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.serve(c, target)
			}()
		}
	}()
	return p
}

// Cut makes every connection from now on carry at most n bytes from the
// client before both sides are closed.
func (p *CutProxy) Cut(n int64) { p.budget.Store(n) }

// Cuts is how many connections were dropped.
func (p *CutProxy) Cuts() int64 { return p.cuts.Load() }

func (p *CutProxy) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(client, server)
		client.Close()
		done <- struct{}{}
	}()
	go func() {
		budget := p.budget.Load()
		buf := make([]byte, 32<<10)
		var sent int64
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if budget >= 0 && sent+int64(n) > budget {
					server.Write(buf[:budget-sent])
					p.cuts.Add(1)
					server.Close()
					client.Close()
					break
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
				sent += int64(n)
			}
			if err != nil {
				break
			}
		}
		server.Close()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// TrickleProxy is a TCP proxy in front of an S3 server that can be told
// to misbehave on the fly (the mode is read for every chunk, so
// connections kept alive misbehave too): pass bytes through, trickle
// what the server sends (one byte per Interval), trickle what the client
// sends, or hold every answer back.
type TrickleProxy struct {
	Host     string
	Interval time.Duration
	mode     atomic.Int32
}

// Modes of a TrickleProxy.
const (
	PassThrough int32 = iota
	TrickleDown       // the server's bytes, one per Interval
	TrickleUp         // the client's bytes, one per Interval
	HoldAnswers       // the server's bytes never reach the client
)

// Mode sets how the proxy behaves from now on.
func (p *TrickleProxy) Mode(m int32) { p.mode.Store(m) }

// StartTrickleProxy proxies to target (host:port) until the test ends.
func StartTrickleProxy(tb testing.TB, target string) *TrickleProxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(tb, err)
	p := &TrickleProxy{Host: l.Addr().String(), Interval: 50 * time.Millisecond}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	tb.Cleanup(func() { close(stop); l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				done := make(chan struct{}, 2)
				go func() { p.copy(s, c, TrickleUp, stop); s.Close(); c.Close(); done <- struct{}{} }()
				go func() { p.copy(c, s, TrickleDown, stop); s.Close(); c.Close(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return p
}

// copy moves src to dst, trickling when the mode is slow, and holding
// the server's bytes in HoldAnswers.
func (p *TrickleProxy) copy(dst, src net.Conn, slow int32, stop <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for i := 0; i < n; {
			m := p.mode.Load()
			switch {
			case m == HoldAnswers && slow == TrickleDown:
				select {
				case <-stop:
					return
				case <-time.After(p.Interval):
				}
				continue
			case m == slow:
				if _, werr := dst.Write(buf[i : i+1]); werr != nil {
					return
				}
				i++
				select {
				case <-stop:
					return
				case <-time.After(p.Interval):
				}
			default:
				if _, werr := dst.Write(buf[i:n]); werr != nil {
					return
				}
				i = n
			}
		}
		if err != nil {
			return
		}
	}
}
