package fleetbench

// ActivityAcks: what a host reporting activity sees. Three daemons
// (reclaimer serve, in-process) share one PostgreSQL ledger; clients send
// single reports (POST /v1/runtimes/{id}/activity) to all three at a
// paced 20,000 a second in total, over keep-alive connections, and time
// each report from its send to its acknowledgement (204). After a clean
// stop of the daemons every acknowledged report is checked in the ledger.
// Also measured: the PostgreSQL connections the three daemons held at
// most (pg_stat_activity, sampled).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
	ackWorkers    = 48     // concurrent senders per replica
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

func (a *ackDaemon) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: ackWorkers,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.sock)
		}}}
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
			mu    sync.Mutex
			lat   []time.Duration
			acked = map[ledger.Key]time.Time{}
			fails int
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
		began := time.Now()
		var wg sync.WaitGroup
		for _, d := range ds {
			jobs := make(chan ackJob, 4096)
			c := d.client()
			for range ackWorkers {
				wg.Go(func() {
					var mine []time.Duration
					mineAcked := map[ledger.Key]time.Time{}
					bad := 0
					for j := range jobs {
						var req *http.Request
						if perRequest == 1 {
							body := []byte(`{"at":"` + j.at.Format(time.RFC3339Nano) + `"}`)
							req, _ = http.NewRequest("POST", "http://replica/v1/runtimes/"+j.ids[0]+"/activity?backend=dir&source="+d.source, bytes.NewReader(body))
						} else {
							var body bytes.Buffer
							body.WriteString(`{"reports":[`)
							for i, id := range j.ids {
								if i > 0 {
									body.WriteByte(',')
								}
								fmt.Fprintf(&body, `{"backend":"dir","source":%q,"id":%q,"at":%q}`, d.source, id, j.at.Format(time.RFC3339Nano))
							}
							body.WriteString(`]}`)
							req, _ = http.NewRequest("POST", "http://replica/v1/activity", &body)
						}
						req.Header.Set("Authorization", "Bearer "+ackTokenValue)
						req.Header.Set("Content-Type", "application/json")
						sent := time.Now()
						resp, err := c.Do(req)
						if err != nil {
							bad++
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
							bad++
							continue
						}
						took := time.Since(sent)
						for _, id := range j.ids {
							mine = append(mine, took) // each report of the request, acknowledged then
							k := ledger.Key{Backend: "dir", Source: d.source, ID: id}
							if j.at.After(mineAcked[k]) {
								mineAcked[k] = j.at
							}
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					for k, at := range mineAcked {
						if at.After(acked[k]) {
							acked[k] = at
						}
					}
					fails += bad
					mu.Unlock()
				})
			}
			// The pace of this replica's share: one report every 150 µs,
			// sent in ticks of 10 ms.
			wg.Go(func() {
				defer close(jobs)
				per := ackRate / ackReplicas / 100
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				n := 0
				for range ackSeconds * 100 {
					<-tick.C
					now := time.Now().UTC()
					for range per / perRequest {
						j := ackJob{at: now}
						for range perRequest {
							j.ids = append(j.ids, fmt.Sprintf("run-%05d", n%ackRuntimes))
							n++
						}
						jobs <- j
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(began)
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
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "reports/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms/report")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms/report")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms/report")
		b.ReportMetric(float64(maxConns)/ackReplicas, "pg-conns/replica")
	}
}
