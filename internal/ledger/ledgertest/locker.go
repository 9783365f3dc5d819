package ledgertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
)

// LockerSuite describes lockers under test: the executable form of the
// ledger.Locker contract, for the file lock of one host and the advisory
// lock of PostgreSQL alike.
type LockerSuite struct {
	// Domain returns a fresh lock domain for one test (a folder, a
	// database URL). Lockers opened on one domain exclude each other, in
	// one process or many.
	Domain func(t *testing.T) string
	// Open opens a locker on a domain, released when tb ends. Each call
	// stands for another process: its locks must exclude the others'.
	Open func(tb testing.TB, domain string) ledger.Locker
	// Child is the name of this package's test function that calls
	// LockerChild first: the cross-process tests run the test binary
	// again, with only that test, as the other processes.
	Child string
}

// Environment of a child process of the cross-process tests.
const (
	childDomainEnv = "RECLAIMER_LOCKER_DOMAIN"
	childMarkerEnv = "RECLAIMER_LOCKER_MARKERS"
)

// RunLocker runs every Locker conformance subtest.
func RunLocker(t *testing.T, s LockerSuite) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s LockerSuite, domain string)
	}{
		{"Excludes", testLockExcludes},
		{"WaitGetsItWhenFreed", testLockWaitGetsIt},
		{"WaitRunsOut", testLockWaitRunsOut},
		{"ContextEnds", testLockContextEnds},
		{"InvalidKey", testLockInvalidKey},
		{"NeverTwoHolders", testLockNeverTwoHolders},
		{"Processes", testLockProcesses},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s, s.Domain(t))
		})
	}
}

func lock(t *testing.T, l ledger.Locker, k ledger.Key, wait time.Duration) func() error {
	t.Helper()
	unlock, err := l.Lock(ctx(t), k, wait)
	mustNil(t, "Lock "+k.String(), err)
	return unlock
}

func testLockExcludes(t *testing.T, s LockerSuite, domain string) {
	a, b := s.Open(t, domain), s.Open(t, domain)
	k, other := key("dir", "run-1"), key("dir", "run-2")
	unlock := lock(t, a, k, 0)
	_, err := b.Lock(ctx(t), k, 0)
	mustBe(t, "second holder", err, ledger.ErrLocked)
	// Not reentrant: a holder asking again is another holder.
	_, err = a.Lock(ctx(t), k, 0)
	mustBe(t, "same locker again", err, ledger.ErrLocked)
	// Another key, and another domain, are not held.
	mustNil(t, "unlock other key", lock(t, b, other, 0)())
	mustNil(t, "unlock other domain", lock(t, s.Open(t, s.Domain(t)), k, 0)())

	mustNil(t, "unlock", unlock())
	mustNil(t, "unlock again", unlock())
	mustNil(t, "unlock after release", lock(t, b, k, 0)())
}

func testLockWaitGetsIt(t *testing.T, s LockerSuite, domain string) {
	a, b := s.Open(t, domain), s.Open(t, domain)
	k := key("docker", "c1")
	unlock := lock(t, a, k, 0)
	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		u, err := b.Lock(ctx(t), k, time.Minute)
		if err == nil {
			if !released.Load() {
				err = errors.New("the waiter got the lock while its holder still had it")
			}
			err = errors.Join(err, u())
		}
		got <- err
	}()
	released.Store(true)
	mustNil(t, "unlock", unlock())
	mustNil(t, "waiter", <-got)
}

func testLockWaitRunsOut(t *testing.T, s LockerSuite, domain string) {
	a, b := s.Open(t, domain), s.Open(t, domain)
	k := key("e2b", "sbx")
	defer lock(t, a, k, 0)()
	const wait = 100 * time.Millisecond
	began := time.Now()
	_, err := b.Lock(ctx(t), k, wait)
	mustBe(t, "Lock with a short wait", err, ledger.ErrLocked)
	if took := time.Since(began); took < wait*9/10 {
		t.Fatalf("gave up after %v, before the %v it was given", took, wait)
	}
}

func testLockContextEnds(t *testing.T, s LockerSuite, domain string) {
	a, b := s.Open(t, domain), s.Open(t, domain)
	k := key("worktree", "repo/a")
	defer lock(t, a, k, 0)()

	c, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := b.Lock(c, k, time.Hour)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		mustBe(t, "Lock whose context ended", err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("Lock did not return 30 s after its context ended")
	}
	_, err := b.Lock(c, key("worktree", "free"), 0)
	mustBe(t, "Lock with an ended context", err, context.Canceled)
}

func testLockInvalidKey(t *testing.T, s LockerSuite, domain string) {
	_, err := s.Open(t, domain).Lock(ctx(t), key("dir", ""), 0)
	mustFail(t, "Lock of an empty id", err)
}

// testLockNeverTwoHolders has goroutines on several lockers take one key
// many times: no two are ever inside at once, and every one gets in.
func testLockNeverTwoHolders(t *testing.T, s LockerSuite, domain string) {
	lockers := []ledger.Locker{s.Open(t, domain), s.Open(t, domain), s.Open(t, domain)}
	k := key("dir", "hot")
	var inside, entered atomic.Int64
	const goroutines, rounds = 6, 15
	inParallel(goroutines, func(w int) {
		l := lockers[w%len(lockers)]
		for range rounds {
			unlock, err := l.Lock(ctx(t), k, time.Minute)
			if err != nil {
				t.Errorf("Lock: %v", err)
				return
			}
			if n := inside.Add(1); n != 1 {
				t.Errorf("%d holders inside at once", n)
			}
			entered.Add(1)
			// Stay a while, so that a broken lock lets others in.
			for range 1000 {
				runtime.Gosched()
			}
			inside.Add(-1)
			if err := unlock(); err != nil {
				t.Errorf("unlock: %v", err)
				return
			}
		}
	})
	if n := entered.Load(); n != goroutines*rounds {
		t.Fatalf("entered %d times, want %d", n, goroutines*rounds)
	}
}

// testLockProcesses checks exclusion across processes: what one process
// holds, others cannot take until it lets go or dies; and processes
// taking one key many times are never inside at once.
func testLockProcesses(t *testing.T, s LockerSuite, domain string) {
	markers := t.TempDir()
	procs := make([]*lockChild, 3)
	for i := range procs {
		procs[i] = startLockChild(t, s.Child, domain, markers)
	}
	a, b, c := procs[0], procs[1], procs[2]
	a.say(t, "hold", "held")
	b.say(t, "try", "busy")
	c.say(t, "try", "busy")
	a.say(t, "release", "released")
	b.say(t, "try", "got")

	// A holder that dies lets go: the kernel closes its file, or
	// PostgreSQL its session.
	a.say(t, "hold", "held")
	c.say(t, "try", "busy")
	a.kill(t)
	c.say(t, "wait", "held")
	c.say(t, "release", "released")

	// Two processes hammer one key; each marks the critical section with a
	// file that only one may create.
	const rounds = 100
	errs := make(chan error, 2)
	for _, p := range []*lockChild{b, c} {
		go func() { errs <- p.ask("hammer " + strconv.Itoa(rounds)) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*lockChild{b, c} {
		p.want(t, "hammered "+strconv.Itoa(rounds))
	}
}

// lockChild is another process holding a locker on the domain.
type lockChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startLockChild(t *testing.T, test, domain, markers string) *lockChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDomainEnv+"="+domain, childMarkerEnv+"="+markers)
	in, err := cmd.StdinPipe()
	mustNil(t, "stdin", err)
	out, err := cmd.StdoutPipe()
	mustNil(t, "stdout", err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	mustNil(t, "start "+test, cmd.Start())
	p := &lockChild{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("child %d said on stderr:\n%s", cmd.Process.Pid, stderr.String())
		}
	})
	p.want(t, "ready")
	return p
}

func (p *lockChild) ask(line string) error {
	_, err := fmt.Fprintln(p.in, line)
	return err
}

func (p *lockChild) want(t *testing.T, want string) {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("child %d: %v (want %q)", p.cmd.Process.Pid, err, want)
	}
	if got := strings.TrimSpace(line); got != want {
		t.Fatalf("child %d said %q, want %q", p.cmd.Process.Pid, got, want)
	}
}

func (p *lockChild) say(t *testing.T, line, want string) {
	t.Helper()
	mustNil(t, "tell child", p.ask(line))
	p.want(t, want)
}

func (p *lockChild) kill(t *testing.T) {
	t.Helper()
	mustNil(t, "kill child", p.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = p.cmd.Process.Wait()
}

// LockerChild is the body of a child process of the cross-process tests:
// it opens a locker with open on the domain its parent gave and obeys
// one command a line on stdin. Call it first in the test named by
// LockerSuite.Child; outside a child process it skips the test.
func LockerChild(t *testing.T, open func(tb testing.TB, domain string) ledger.Locker) {
	domain := os.Getenv(childDomainEnv)
	if domain == "" {
		t.Skip("runs only as a child process of the Locker conformance suite")
	}
	markers := os.Getenv(childMarkerEnv)
	l := open(t, domain)
	k := key("dir", "hot")
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) {
		out.WriteString(s + "\n")
		out.Flush()
	}
	var unlock func() error
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "hold", "wait":
			wait := time.Duration(0)
			if cmd == "wait" {
				wait = time.Minute
			}
			u, err := l.Lock(t.Context(), k, wait)
			switch {
			case err == nil:
				unlock = u
				say("held")
			case errors.Is(err, ledger.ErrLocked):
				say("busy")
			default:
				say("error " + err.Error())
			}
		case "release":
			if err := unlock(); err != nil {
				say("error " + err.Error())
				continue
			}
			say("released")
		case "try":
			u, err := l.Lock(t.Context(), k, 0)
			switch {
			case err == nil:
				u()
				say("got")
			case errors.Is(err, ledger.ErrLocked):
				say("busy")
			default:
				say("error " + err.Error())
			}
		case "hammer":
			n, _ := strconv.Atoi(arg)
			say(hammer(t.Context(), l, k, n, filepath.Join(markers, "inside")))
		default:
			say("unknown command " + cmd)
		}
	}
}

// hammer takes k n times; inside, it creates the marker file, which fails
// when another process is inside too.
func hammer(c context.Context, l ledger.Locker, k ledger.Key, n int, marker string) string {
	for i := range n {
		unlock, err := l.Lock(c, k, time.Minute)
		if err != nil {
			return fmt.Sprintf("error at %d: %v", i, err)
		}
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			unlock()
			return fmt.Sprintf("violation at %d: %v", i, err)
		}
		f.Close()
		if err := os.Remove(marker); err != nil {
			unlock()
			return fmt.Sprintf("error at %d: %v", i, err)
		}
		if err := unlock(); err != nil {
			return fmt.Sprintf("error at %d: %v", i, err)
		}
	}
	return fmt.Sprintf("hammered %d", n)
}
