package leader_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/leader"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
)

// Environment of an elector process.
const (
	urlEnv  = "RECLAIMER_ELECTOR_URL"
	nameEnv = "RECLAIMER_ELECTOR_NAME"
	ttlEnv  = "RECLAIMER_ELECTOR_TTL"
)

// TestElectorProcess is the body of one replica of
// TestElectorsInProcesses: an elector on the real PostgreSQL that, while
// it leads, journals fenced work every 20 ms and then "calls the
// provider" (says so on stdout) only if its term is still valid. It says
// "lead GEN ELECTED_AT" and "follow" as its leadership changes, and when
// it finds that a stretch longer than the lease went by between two of
// its ticks (it was stopped), it tries one write with the fence it had:
// "probe refused GEN" is the only acceptable answer.
func TestElectorProcess(t *testing.T) {
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip("runs only as a replica of TestElectorsInProcesses")
	}
	name := os.Getenv(nameEnv)
	ttl, err := time.ParseDuration(os.Getenv(ttlEnv))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	store, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	out := make(chan string, 100)
	say := func(format string, args ...any) { out <- fmt.Sprintf(format, args...) }
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		w := bufio.NewWriter(os.Stdout)
		for line := range out {
			w.WriteString(line + "\n")
			w.Flush()
		}
	}()
	el, err := leader.New(leader.Config{Lessor: store, Lease: "remote", Replica: name, TTL: ttl,
		OnChange: func(s leader.Status) {
			if s.Leading {
				say("lead %d %d", s.Lease.Generation, s.Lease.ElectedAt.UnixNano())
			} else if s.Lease.Holder == "" || !strings.HasPrefix(s.Lease.Holder, name+"#") {
				say("follow")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { defer close(ran); el.Run(ctx) }()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	var fence *ledger.Fence
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			continue
		case <-tick.C:
		}
		if time.Since(last) > ttl && fence != nil {
			err := store.Fenced(ctx, *fence, func(ctx context.Context, st ledger.Store) error {
				_, err := st.AppendIntent(ctx, work(*fence, name))
				return err
			})
			if errors.Is(err, ledger.ErrFenced) {
				say("probe refused %d", fence.Generation)
			} else {
				say("probe accepted %d: %v", fence.Generation, err)
			}
		}
		last = time.Now()
		term, ok := el.Term()
		if !ok {
			continue
		}
		f := term.Fence()
		err := store.Fenced(term.Context(), f, func(ctx context.Context, st ledger.Store) error {
			// No newer generation may have written yet: it cannot exist
			// while this transaction holds the lease row.
			newest, err := st.ListJournal(ctx, ledger.JournalFilter{Limit: 1})
			if err != nil {
				return err
			}
			if len(newest) == 1 && newest[0].Intent.PlanID > work(f, name).PlanID {
				return fmt.Errorf("VIOLATION: generation %s wrote before %d committed", newest[0].Intent.PlanID, f.Generation)
			}
			_, err = st.AppendIntent(ctx, work(f, name))
			return err
		})
		if err != nil && strings.Contains(err.Error(), "VIOLATION") {
			say("%v", err)
		}
		fence = &f
		if err == nil && term.Valid() {
			say("call %d %d", f.Generation, time.Now().UnixNano())
		}
	}
	<-ran // resigned
	close(out)
	<-printed
}

// work is the journal entry a replica writes for generation f.
func work(f ledger.Fence, replica string) ledger.Intent {
	return ledger.Intent{PlanID: fmt.Sprintf("g%012d", f.Generation), Key: ledger.Key{Backend: "work", ID: replica},
		Step: "work", At: time.Now()}
}

type event struct {
	replica string
	words   []string
}

type electorProcess struct {
	name string
	cmd  *exec.Cmd
}

// TestElectorsInProcesses runs three replicas as processes on the real
// PostgreSQL: the leader killed with SIGKILL is replaced within 2 x TTL;
// one stopped with SIGSTOP too, and when it wakes its stale fence is
// refused and it acts on nothing; one stopped with SIGTERM resigns and
// its successor leads at once. No write of a generation comes after a
// newer generation was elected, and no provider call either.
func TestElectorsInProcesses(t *testing.T) {
	url := pgtest.NewDatabase(t)
	// Long enough that a loaded machine (CI runs packages side by side)
	// does not make a replica miss two renewals by accident.
	const ttl = 4 * time.Second
	events := make(chan event, 1000)
	procs := map[string]*electorProcess{}
	for _, name := range []string{"a", "b", "c"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestElectorProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), urlEnv+"="+url, nameEnv+"="+name, ttlEnv+"="+ttl.String())
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[name] = &electorProcess{name: name, cmd: cmd}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				events <- event{replica: name, words: strings.Fields(sc.Text())}
			}
		}()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() && stderr.Len() > 0 {
				t.Logf("replica %s said on stderr:\n%s", name, stderr.String())
			}
		})
	}
	electedAt := map[int64]int64{} // generation -> when the database elected it
	type call struct{ gen, at int64 }
	var calls []call
	// next waits for an event that satisfies want, noting every lead and
	// call on the way; it fails the test on a violation or a stale fence
	// that was accepted.
	next := func(within time.Duration, what string, want func(event) bool) event {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case e := <-events:
				switch e.words[0] {
				case "lead":
					g, _ := strconv.ParseInt(e.words[1], 10, 64)
					at, _ := strconv.ParseInt(e.words[2], 10, 64)
					electedAt[g] = at
				case "call":
					g, _ := strconv.ParseInt(e.words[1], 10, 64)
					at, _ := strconv.ParseInt(e.words[2], 10, 64)
					calls = append(calls, call{g, at})
				case "VIOLATION:", "probe":
					if e.words[0] == "VIOLATION:" || e.words[1] != "refused" {
						t.Fatalf("replica %s: %s", e.replica, strings.Join(e.words, " "))
					}
				}
				if want(e) {
					return e
				}
			case <-deadline:
				t.Fatalf("no %s within %v", what, within)
			}
		}
	}
	leadBy := func(except ...string) func(event) bool {
		return func(e event) bool {
			for _, x := range except {
				if e.replica == x {
					return false
				}
			}
			return e.words[0] == "lead"
		}
	}
	callsBy := func(replica string, n int) func(event) bool {
		seen := 0
		return func(e event) bool {
			if e.replica == replica && e.words[0] == "call" {
				seen++
			}
			return seen >= n
		}
	}

	first := next(30*time.Second, "first leader", leadBy()).replica
	next(10*time.Second, "work by the first leader", callsBy(first, 10))

	// kill -9: nobody resigns; the lease runs out.
	procs[first].cmd.Process.Kill()
	killed := time.Now()
	second := next(2*ttl, "leader after kill -9", leadBy(first)).replica
	t.Logf("kill -9: %s led again after %v", second, time.Since(killed))
	next(10*time.Second, "work by the second leader", callsBy(second, 10))

	// SIGSTOP: the leader is stopped wherever it was, maybe in the middle
	// of a fenced write.
	procs[second].cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	third := next(2*ttl, "leader after SIGSTOP", leadBy(first, second)).replica
	t.Logf("SIGSTOP: %s led after %v", third, time.Since(stopped))
	next(10*time.Second, "work by the third leader", callsBy(third, 10))
	procs[second].cmd.Process.Signal(syscall.SIGCONT)
	next(10*time.Second, "the woken leader's stale write refused", func(e event) bool {
		return e.replica == second && e.words[0] == "probe"
	})

	// SIGTERM: the leader resigns, and the other takes over at once.
	procs[third].cmd.Process.Signal(syscall.SIGTERM)
	resigned := time.Now()
	next(2*ttl, "leader after SIGTERM", leadBy(first, third))
	if took := time.Since(resigned); took > ttl/2 {
		t.Errorf("the successor took %v after a resignation, want well under the %v lease", took, ttl)
	}
	t.Logf("SIGTERM: %s led after %v", second, time.Since(resigned))
	if err := procs[third].cmd.Wait(); err != nil {
		t.Errorf("the resigning replica: %v", err)
	}
	next(10*time.Second, "work by the last leader", callsBy(second, 10))
	procs[second].cmd.Process.Signal(syscall.SIGTERM)
	if err := procs[second].cmd.Wait(); err != nil {
		t.Errorf("the last replica: %v", err)
	}

	// Every provider call of a generation came before any newer one was
	// elected.
	for _, c := range calls {
		for g, at := range electedAt {
			if g > c.gen && c.at >= at {
				t.Errorf("a call of generation %d at %d came after generation %d was elected at %d", c.gen, c.at, g, at)
			}
		}
	}
	// Every journal write of a generation came before any of a newer one.
	store, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.ListJournal(t.Context(), ledger.JournalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	gens := map[string]bool{}
	for i := 1; i < len(entries); i++ { // newest first
		newer, older := entries[i-1].Intent.PlanID, entries[i].Intent.PlanID
		if older > newer {
			t.Fatalf("entry %d of %s was written after entry %d of %s", entries[i].ID, older, entries[i-1].ID, newer)
		}
		gens[older] = true
	}
	if len(gens) < 4 {
		t.Fatalf("writes of %d generations, want 4 (one per leader)", len(gens))
	}
	t.Logf("%d fenced writes, %d provider calls, over %d generations", len(entries), len(calls), len(gens))
}

// TestPartitionedLeaderStops cuts the leader off PostgreSQL (its
// connections hang, as behind a partition): it stops acting while its
// lease still holds, another replica leads within 2 x TTL, and once the
// partition heals its old fence is refused and it follows.
func TestPartitionedLeaderStops(t *testing.T) {
	srv := pgtest.Shared(t)
	url := pgtest.NewDatabase(t)
	proxy := srv.NewProxy(t)
	dbName := url[len("postgres:///"):strings.Index(url, "?")]
	const ttl = 3 * time.Second
	open := func(url string) *postgres.Store {
		s, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	behind, direct := open(proxy.URL(dbName)), open(url)
	run := func(s *postgres.Store, name string) *leader.Elector {
		el, err := leader.New(leader.Config{Lessor: s, Lease: "remote", Replica: name, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); el.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return el
	}
	a := run(behind, "a")
	term := waitTerm(t, a, 10*time.Second)
	b := run(direct, "b")

	proxy.Pause()
	cut := time.Now()
	<-term.Context().Done()
	lease, err := direct.Current(t.Context(), "remote")
	if err != nil || lease.Generation != term.Fence().Generation {
		t.Fatalf("when the cut-off leader stopped the lease was %v, %v; want still its own", lease, err)
	}
	if ok, err := holdsNow(t, direct, term.Fence()); err != nil || !ok {
		t.Fatalf("the lease did not hold any more when the cut-off leader stopped (%v): it acted past it", err)
	}
	bt := waitTerm(t, b, 2*ttl-time.Since(cut))
	t.Logf("partition: the other replica led %v after the cut", time.Since(cut))

	proxy.Restore()
	if ok, err := holdsNow(t, behind, term.Fence()); err != nil || ok {
		t.Fatalf("after the partition healed the old fence holds: %v, %v", ok, err)
	}
	time.Sleep(ttl) // a lease's worth of the healed replica's attempts
	if _, ok := a.Term(); ok {
		t.Fatal("the healed replica leads again")
	}
	if !bt.Valid() {
		t.Fatal("the new leader lost its term once the old one came back")
	}
}

func waitTerm(t *testing.T, el *leader.Elector, within time.Duration) *leader.Term {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if term, ok := el.Term(); ok {
			return term
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s does not lead within %v", el.Holder(), within)
	return nil
}

func holdsNow(t *testing.T, s *postgres.Store, f ledger.Fence) (bool, error) {
	err := s.Fenced(t.Context(), f, func(context.Context, ledger.Store) error { return nil })
	if errors.Is(err, ledger.ErrFenced) {
		return false, nil
	}
	return err == nil, err
}
