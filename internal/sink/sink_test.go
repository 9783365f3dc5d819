package sink_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTrip puts, reads back, replaces and removes objects: the contract
// every sink keeps.
func roundTrip(t *testing.T, s sink.Sink) {
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(t, 7<<20+13) // more than one S3 part at 5 MiB
	name := "worktree/repo:feature/20260101T000000Z.tar.zst"
	n, err := s.Put(ctx, name, bytes.NewReader(data))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("put: %d, %v", n, err)
	}
	r, err := s.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want %d bytes equal", len(got), err, len(data))
	}
	if _, err := s.Put(ctx, name, strings.NewReader("replaced")); err != nil {
		t.Fatal(err)
	}
	r, err = s.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(r)
	r.Close()
	if string(got) != "replaced" {
		t.Fatalf("after a second put: %q", got)
	}
	if err := s.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, name); err != nil {
		t.Fatalf("removing a missing object: %v", err)
	}
	if _, err := s.Open(ctx, name); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("open after remove: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "/abs", "a/../b", "a//b", "./a", `a\b`, "a/.."} {
		if _, err := s.Put(ctx, bad, strings.NewReader("x")); err == nil {
			t.Errorf("put %q: accepted", bad)
		}
	}
}

func TestLocalRoundTrip(t *testing.T) {
	root := filepath.Join(t.TempDir(), "archives")
	s, err := sink.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, s)
	// Removing the last object leaves no empty folders behind.
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// A failing reader leaves neither the object nor a temporary file.
func TestLocalPutFailureLeavesNothing(t *testing.T) {
	root := t.TempDir()
	s, _ := sink.NewLocal(root)
	r := io.MultiReader(strings.NewReader("partial"), errReader{})
	if _, err := s.Put(context.Background(), "a/b.tar.zst", r); err == nil {
		t.Fatal("no error")
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "a")); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source broke") }

func newS3(t *testing.T, srv *testtree.S3Server, endpoint, bucket string) *sink.S3 {
	s, err := sink.NewS3(sink.S3Options{Endpoint: endpoint, Bucket: bucket, Prefix: "agents/host1", Region: "us-east-1",
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3RoundTrip(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	s := newS3(t, srv, srv.Endpoint, "archives")
	if got := s.URL("x/y"); got != "s3://archives/agents/host1/x/y" {
		t.Fatalf("URL: %s", got)
	}
	roundTrip(t, s)
}

func TestS3MissingBucket(t *testing.T) {
	srv := testtree.StartS3(t)
	s := newS3(t, srv, srv.Endpoint, "nobucket")
	err := s.Check(context.Background())
	if !errors.Is(err, sink.ErrNotFound) || !strings.Contains(err.Error(), "nobucket") {
		t.Fatalf("check: %v", err)
	}
	_, err = s.Put(context.Background(), "a/b", strings.NewReader("x"))
	if !errors.Is(err, sink.ErrNotFound) || !strings.Contains(err.Error(), "bucket nobucket does not exist") {
		t.Fatalf("put: %v", err)
	}
}

func TestS3Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close() // nothing listens here now
	s, err := sink.NewS3(sink.S3Options{Endpoint: "http://" + host, Bucket: "archives", AccessKeyID: "k", SecretAccessKey: "s", MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("check: %v", err)
	}
}

// An upload whose connection drops in the middle fails, and no object
// (whole or partial) appears.
func TestS3UploadCutOff(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	proxy := testtree.StartCutProxy(t, srv.Host)
	s := newS3(t, srv, "http://"+proxy.Host, "archives")
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.Cut(3 << 20)
	_, err := s.Put(context.Background(), "a/cut.tar.zst", bytes.NewReader(randomBytes(t, 12<<20)))
	if err == nil {
		t.Fatal("a cut-off upload succeeded")
	}
	if proxy.Cuts() == 0 {
		t.Fatal("the proxy cut nothing")
	}
	direct := newS3(t, srv, srv.Endpoint, "archives")
	if _, err := direct.Open(context.Background(), "a/cut.tar.zst"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("after a cut-off upload: %v, want ErrNotFound", err)
	}
}

func TestS3Credentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := sink.NewS3(sink.S3Options{Endpoint: "http://127.0.0.1:1", Bucket: "b"}); err == nil ||
		!strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("no credentials: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, err := sink.NewS3(sink.S3Options{Endpoint: "http://127.0.0.1:1", Bucket: "b"}); err != nil {
		t.Fatalf("from the environment: %v", err)
	}
	file := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(file, []byte("[archive]\naws_access_key_id = id2\naws_secret_access_key = secret2\n"), 0o600)
	if _, err := sink.NewS3(sink.S3Options{Endpoint: "http://127.0.0.1:1", Bucket: "b", CredentialsFile: file, Profile: "archive"}); err != nil {
		t.Fatalf("from a file: %v", err)
	}
	if _, err := sink.NewS3(sink.S3Options{Endpoint: "http://127.0.0.1:1", Bucket: "b", CredentialsFile: file, Profile: "nope"}); err == nil {
		t.Fatal("a missing profile was accepted")
	}
	for _, ep := range []string{"", "ftp://x", "http://x/path"} {
		if _, err := sink.NewS3(sink.S3Options{Endpoint: ep, Bucket: "b"}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
}

// TestS3StallDetector: rule "a transfer that does not move ends". Through
// a proxy in front of a real S3 server, an upload the server reads a byte
// at a time, a read-back trickling a byte at a time, and a removal never
// answered each fail as stalled within a few windows, and no partial
// object appears; the same proxy passing bytes through at full speed
// carries a whole round trip.
func TestS3StallDetector(t *testing.T) {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	proxy := testtree.StartTrickleProxy(t, srv.Host)
	open := func(window time.Duration) *sink.S3 {
		s, err := sink.NewS3(sink.S3Options{Endpoint: "http://" + proxy.Host, Bucket: "archives", Prefix: "agents/host1", Region: "us-east-1",
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20, MaxRetries: 1,
			StallTimeout: window, StallBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// s detects stalls within a small window; calm, with a window a loaded
	// test machine cannot miss (waiting for an answer moves nothing, and a
	// server finishing an upload under -race may pause for longer than
	// 400 ms), carries the transfers that must succeed.
	s, calm := open(400*time.Millisecond), open(5*time.Second)
	roundTrip(t, calm) // no false alarm at full speed
	var err error
	ctx := context.Background()
	stalled := func(what string, err error, start time.Time) {
		t.Helper()
		if err == nil || !(errors.Is(err, sink.ErrStalled) || strings.Contains(err.Error(), sink.ErrStalled.Error())) {
			t.Fatalf("%s: %v, want stalled", what, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("%s took %s", what, took)
		}
	}

	proxy.Mode(testtree.TrickleUp)
	start := time.Now()
	_, err = s.Put(ctx, "a/up.tar.zst", bytes.NewReader(randomBytes(t, 1<<20)))
	stalled("an upload read a byte at a time", err, start)
	proxy.Mode(testtree.PassThrough)
	if _, err := calm.Open(ctx, "a/up.tar.zst"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("after a stalled upload: %v, want ErrNotFound", err)
	}

	data := randomBytes(t, 256<<10)
	if _, err := calm.Put(ctx, "a/down.tar.zst", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	proxy.Mode(testtree.TrickleDown)
	start = time.Now()
	r, err := s.Open(ctx, "a/down.tar.zst")
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	stalled("a read-back trickling a byte at a time", err, start)

	proxy.Mode(testtree.HoldAnswers)
	start = time.Now()
	stalled("a removal never answered", s.Remove(ctx, "a/down.tar.zst"), start)
}
