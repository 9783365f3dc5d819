// Command activity-load measures how many activity reports a second a
// running `reclaimer serve` takes, and their latency percentiles, from a
// second process over loopback.
//
// Against a daemon already running:
//
//	go run ./bench/activity-load -url http://127.0.0.1:7390 -token-file ~/.local/state/reclaimer/api.token
//
// Or let it start one (a real SQLite ledger and run folders in a temporary
// folder), load it, stop it with SIGTERM, and check in the ledger that
// every acknowledged report was kept:
//
//	go build -o /tmp/reclaimer ./cmd/reclaimer && go run ./bench/activity-load -reclaimer /tmp/reclaimer
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/ledger/sqlite"
)

func main() {
	url := flag.String("url", "", "the daemon's base URL (default: start one with -reclaimer)")
	tokenFile := flag.String("token-file", "", "the API token file")
	bin := flag.String("reclaimer", "", "start this reclaimer binary as the daemon under test")
	backend := flag.String("backend", "dir", "backend of the reported runtimes")
	runtimes := flag.Int("runtimes", 1000, "how many runtimes to report on (run folders when starting the daemon)")
	workers := flag.Int("concurrency", 64, "requests in flight")
	duration := flag.Duration("duration", 10*time.Second, "how long to load")
	warmup := flag.Duration("warmup", 2*time.Second, "load before measuring")
	flag.Parse()
	if err := run(*url, *tokenFile, *bin, *backend, *runtimes, *workers, *duration, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "activity-load:", err)
		os.Exit(1)
	}
}

func run(url, tokenFile, bin, backendName string, nRuntimes, workers int, duration, warmup time.Duration) error {
	var stop func() error
	var ledgerPath string
	var pid int
	if url == "" {
		if bin == "" {
			return errors.New("give -url (a running daemon) or -reclaimer (a binary to start)")
		}
		var err error
		var cleanup func()
		url, tokenFile, ledgerPath, pid, stop, cleanup, err = startDaemon(bin, nRuntimes)
		if err != nil {
			return err
		}
		defer cleanup()
		defer func() {
			if stop != nil {
				stop()
			}
		}()
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	auth := "Bearer " + strings.TrimSpace(string(tok))
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers,
		DialContext: (&net.Dialer{KeepAlive: time.Minute}).DialContext}}

	ids := make([]string, nRuntimes)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%05d", i)
	}
	// newest[i] is the newest time acknowledged for runtime i.
	newest := make([]atomic.Int64, nRuntimes)
	var failures atomic.Int64
	var measuring atomic.Bool
	lat := make([][]time.Duration, workers)
	ctx, cancel := context.WithTimeout(context.Background(), warmup+duration)
	defer cancel()
	var wg sync.WaitGroup
	var measuredStart time.Time
	var cpuStart time.Duration
	go func() {
		time.Sleep(warmup)
		cpuStart = cpuTime(pid)
		measuredStart = time.Now()
		measuring.Store(true)
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += workers {
				r := i % nRuntimes
				at := time.Now().UTC().Truncate(time.Microsecond)
				body := []byte(`{"at":"` + at.Format(time.RFC3339Nano) + `"}`)
				req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/runtimes/"+ids[r]+"/activity?backend="+backendName, bytes.NewReader(body))
				req.Header.Set("Authorization", auth)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(req)
				took := time.Since(start)
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					failures.Add(1)
					continue
				}
				for {
					old := newest[r].Load()
					if at.UnixNano() <= old || newest[r].CompareAndSwap(old, at.UnixNano()) {
						break
					}
				}
				if measuring.Load() {
					lat[w] = append(lat[w], took)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(measuredStart)
	cpu := cpuTime(pid) - cpuStart
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) == 0 {
		return fmt.Errorf("no report succeeded (%d failures)", failures.Load())
	}
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	fmt.Printf("activity reports: %d in %s over %d connections, %d runtimes, %d failed\n",
		len(all), elapsed.Round(time.Millisecond), workers, nRuntimes, failures.Load())
	fmt.Printf("throughput: %.0f reports/s\n", float64(len(all))/elapsed.Seconds())
	fmt.Printf("latency: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		pct(0.999).Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
	if pid > 0 {
		fmt.Printf("daemon CPU: %.0f%% of one core, %.1f µs per report\n",
			100*cpu.Seconds()/elapsed.Seconds(), float64(cpu.Microseconds())/float64(len(all)))
	}

	if stop == nil {
		return nil
	}
	// A clean stop, then every acknowledged report must be in the ledger.
	if err := stop(); err != nil {
		return fmt.Errorf("stop the daemon: %w", err)
	}
	stop = nil
	st, err := sqlite.Open(context.Background(), ledgerPath)
	if err != nil {
		return err
	}
	defer st.Close()
	times, err := st.ActivityTimes(context.Background())
	if err != nil {
		return err
	}
	lost := 0
	for i, id := range ids {
		want := newest[i].Load()
		if want == 0 {
			continue
		}
		if got := times[ledger.Key{Backend: backendName, ID: id}]; got.UnixNano() < want {
			lost++
		}
	}
	fmt.Printf("after a clean stop: %d of %d runtimes have their newest acknowledged report in the ledger\n", nRuntimes-lost, nRuntimes)
	if lost > 0 {
		return fmt.Errorf("%d runtimes lost acknowledged activity", lost)
	}
	return nil
}

// startDaemon lays out n run folders and a configuration in a temporary
// folder and starts bin serve on a free loopback port.
func startDaemon(bin string, n int) (url, tokenFile, ledgerPath string, pid int, stop func() error, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "activity-load-")
	if err != nil {
		return
	}
	runs := filepath.Join(dir, "runs")
	for i := range n {
		if err = os.MkdirAll(filepath.Join(runs, fmt.Sprintf("run-%05d", i)), 0o755); err != nil {
			return
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	addr := ln.Addr().String()
	ln.Close()
	ledgerPath = filepath.Join(dir, "state", "ledger.db")
	cfg := filepath.Join(dir, "reclaimer.toml")
	err = os.WriteFile(cfg, []byte(fmt.Sprintf("[ledger]\npath = %q\n[archive]\ndir = %q\n[server]\nlisten = %q\nlog_level = \"warn\"\n[[dirs]]\nroot = %q\n",
		ledgerPath, filepath.Join(dir, "archives"), addr, runs)), 0o600)
	if err != nil {
		return
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err = cmd.Start(); err != nil {
		return
	}
	stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return cmd.Wait()
	}
	cleanup = func() { os.RemoveAll(dir) }
	url = "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, herr := http.Get(url + "/healthz")
		if herr == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			cleanup()
			return "", "", "", 0, nil, nil, fmt.Errorf("the daemon did not come up at %s", url)
		}
	}
	return url, filepath.Join(dir, "state", "api.token"), ledgerPath, cmd.Process.Pid, stop, cleanup, nil
}

// cpuTime is the user and system CPU time of process pid so far (0 when
// unknown), from /proc/PID/stat in clock ticks of 10 ms.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
