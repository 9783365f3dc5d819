package fleetbench

// ActivityAcks: what a host reporting activity sees. Three daemons
// (reclaimer serve, in-process) share one PostgreSQL ledger; clients send
// reports to all three at 20,000 a second in total, paced open-loop, over
// keep-alive connections, single (POST /v1/runtimes/{id}/activity) or in
// batches of 20 (POST /v1/activity), and time each report from when it
// was due to its acknowledgement (p50, p99, max: a report that waited for
// a free sender counts its wait) and from its send (p99-sent), and the
// CPU the process (daemons and senders, not PostgreSQL) spent per report. After a clean
// stop of the daemons every acknowledged report is checked in the ledger.
// Also measured: the PostgreSQL connections the three daemons held at
// most (pg_stat_activity, sampled).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/postgres/pgtest"
	"github.com/reclaimer/reclaimer/internal/server"
)

const (
	ackReplicas   = 3
	ackRate       = 20_000 // reports a second, in total
	ackSeconds    = 10
	ackRuntimes   = 10_000 // per replica
	ackWorkers    = 16     // concurrent senders (keep-alive connections) per replica
	ackTokenValue = "bench-token-0123456789abcdef"
)

type ackDaemon struct {
	sock, source string
	stop         context.CancelFunc
	done         chan error
}

func startDaemon(b *testing.B, dbURL string, i int) *ackDaemon {
	dir, err := os.MkdirTemp("", "ack-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	runs := filepath.Join(dir, "runs")
	os.MkdirAll(runs, 0o700)
	os.WriteFile(filepath.Join(dir, "token"), []byte(ackTokenValue+"\n"), 0o600)
	name := fmt.Sprintf("r%d", i+1)
	cfg := fmt.Sprintf("[ledger]\npath = %q\nurl = %q\n\n[server]\nname = %q\nlisten = \"unix:%s\"\ntoken_file = %q\ninterval = \"1h\"\nlog_level = \"error\"\n\n[[dirs]]\nroot = %q\n",
		filepath.Join(dir, "state", "ledger.db"), dbURL, name, filepath.Join(dir, "api.sock"), filepath.Join(dir, "token"), runs)
	cfgPath := filepath.Join(dir, "reclaimer.toml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	ready := make(chan struct{})
	d, err := server.Open(context.Background(), server.Options{ConfigPath: cfgPath, Logs: io.Discard, Ready: func(string) { close(ready) }})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &ackDaemon{sock: filepath.Join(dir, "api.sock"), source: name + "/dirs:" + runs, stop: cancel, done: make(chan error, 1)}
	go func() { a.done <- d.Serve(ctx) }()
	<-ready
	return a
}

// rawClient is one keep-alive connection that writes HTTP/1.1 requests
// by hand and reads answers with http.ReadResponse: the generator shares
// the two cores with the daemons and PostgreSQL, and net/http's client
// (two goroutines and several channel hand-offs per request) would take
// as much of them as the daemons it measures.
type rawClient struct {
	sock string
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

// do sends one POST of body to path and returns the answer's status.
func (c *rawClient) do(path string, body []byte) (int, error) {
	if c.conn == nil {
		conn, err := net.Dial("unix", c.sock)
		if err != nil {
			return 0, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	b := append(c.buf[:0], "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: replica\r\nAuthorization: Bearer "+ackTokenValue+"\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.buf = b
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		c.close()
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	return resp.StatusCode, err
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// processCPU is the CPU time this process (the three daemons and the
// senders) used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type ackJob struct {
	ids []string
	at  time.Time
}

func BenchmarkActivityAcks(b *testing.B) {
	// per: reports per request: 1 (POST /v1/runtimes/{id}/activity), or
	// a host's batch (POST /v1/activity), acknowledged together.
	for _, per := range []int{1, 20} {
		b.Run(fmt.Sprintf("reports-per-request=%d", per), func(b *testing.B) { benchAcks(b, per) })
	}
}

func benchAcks(b *testing.B, perRequest int) {
	for b.Loop() {
		srv := pgtest.Shared(b)
		dbURL := srv.NewDatabase(b)
		ds := make([]*ackDaemon, ackReplicas)
		for i := range ds {
			ds[i] = startDaemon(b, dbURL, i)
		}
		var (
			mu      sync.Mutex
			lat     []time.Duration // from when each report was due
			latSent []time.Duration // from when it was sent
			acked   = map[ledger.Key]time.Time{}
			fails   int
			lastAck time.Time
		)
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		maxConns := 0
		sampleDone := make(chan struct{})
		sampleCtx, stopSample := context.WithCancel(context.Background())
		go func() {
			defer close(sampleDone)
			for sampleCtx.Err() == nil {
				var n int
				// Every connection but the bench's own (this one, and its
				// check store's pool, idle: counted once opened, so
				// subtracted by application name).
				if err := conn.QueryRow(sampleCtx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'reclaimer'`).Scan(&n); err == nil {
					maxConns = max(maxConns, n)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
		cpuBefore := processCPU(b)
		began := time.Now()
		var wg sync.WaitGroup
		for _, d := range ds {
			jobs := make(chan ackJob, 4096)
			for range ackWorkers {
				wg.Go(func() {
					c := &rawClient{sock: d.sock}
					defer c.close()
					var mine, mineSent []time.Duration
					var last time.Time
					mineAcked := map[ledger.Key]time.Time{}
					bad := 0
					var body []byte
					for j := range jobs {
						at := j.at.UTC().Format(time.RFC3339Nano)
						var path string
						if perRequest == 1 {
							body = append(append(append(body[:0], `{"at":"`...), at...), `"}`...)
							path = "/v1/runtimes/" + j.ids[0] + "/activity?backend=dir&source=" + d.source
						} else {
							body = append(body[:0], `{"reports":[`...)
							for i, id := range j.ids {
								if i > 0 {
									body = append(body, ',')
								}
								body = append(body, `{"backend":"dir","source":`...)
								body = strconv.AppendQuote(body, d.source)
								body = append(body, `,"id":"`...)
								body = append(body, id...)
								body = append(body, `","at":"`...)
								body = append(body, at...)
								body = append(body, `"}`...)
							}
							body = append(body, `]}`...)
							path = "/v1/activity"
						}
						sent := time.Now()
						code, err := c.do(path, body)
						if err != nil || (code != http.StatusNoContent && code != http.StatusOK) {
							bad++
							continue
						}
						done := time.Now()
						last = done
						for _, id := range j.ids {
							// Each report of the request, acknowledged then:
							// from when it was due (a report waiting for a
							// free sender counts its wait) and from its send.
							mine = append(mine, done.Sub(j.at))
							mineSent = append(mineSent, done.Sub(sent))
							k := ledger.Key{Backend: "dir", Source: d.source, ID: id}
							if j.at.After(mineAcked[k]) {
								mineAcked[k] = j.at
							}
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					latSent = append(latSent, mineSent...)
					for k, at := range mineAcked {
						if at.After(acked[k]) {
							acked[k] = at
						}
					}
					fails += bad
					if last.After(lastAck) {
						lastAck = last
					}
					mu.Unlock()
				})
			}
			// This replica's share, paced open-loop: report n is due at
			// began + n/share whatever the answers so far, and is stamped
			// with that time (a schedule that falls behind is not
			// stretched, it shows in the latency from due).
			wg.Go(func() {
				defer close(jobs)
				share := float64(ackRate) / ackReplicas
				total := int(share * ackSeconds)
				for n := 0; n < total; {
					due := int(share*time.Since(began).Seconds()) + 1
					for ; n < min(due, total); n += perRequest {
						j := ackJob{at: began.Add(time.Duration(float64(n) / share * float64(time.Second)))}
						for i := range perRequest {
							j.ids = append(j.ids, fmt.Sprintf("run-%05d", (n+i)%ackRuntimes))
						}
						jobs <- j
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		// drain: how long after the last report was due its answer came.
		share := float64(ackRate) / ackReplicas
		lastN := (int(share*ackSeconds) - 1) / perRequest * perRequest
		lastDue := began.Add(time.Duration(float64(lastN) / share * float64(time.Second)))
		drain := lastAck.Sub(lastDue)
		cpu := processCPU(b) - cpuBefore
		stopSample()
		<-sampleDone
		// A clean stop: every acknowledged report is written.
		for _, d := range ds {
			d.stop()
		}
		for _, d := range ds {
			if err := <-d.done; err != nil {
				b.Fatal(err)
			}
		}
		check := openPostgres(b, dbURL) // after the run: its pool is not counted
		missing := 0
		for k, at := range acked {
			got, err := check.LastActivity(context.Background(), k)
			if err != nil || got.Before(at) {
				missing++
			}
		}
		if missing > 0 || fails > 0 {
			b.Fatalf("%d acknowledged reports not in the ledger after a clean stop; %d reports not acknowledged", missing, fails)
		}
		slices.Sort(lat)
		slices.Sort(latSent)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(float64(len(lat))/lastAck.Sub(began).Seconds(), "reports/s")
		b.ReportMetric(ms(drain), "drain-ms")
		b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms/report")
		b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms/report")
		b.ReportMetric(ms(lat[len(lat)-1]), "max-ms/report")
		b.ReportMetric(ms(latSent[len(latSent)*99/100]), "p99-sent-ms/report")
		b.ReportMetric(float64(maxConns)/ackReplicas, "pg-conns/replica")
		b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-us/report")
	}
}
