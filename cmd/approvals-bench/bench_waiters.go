package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchWaiters is the waiters scenario (issue 29): it submits --waiters
// pending actions, holds one long-poll (?wait=25s, one connection each) on
// every one of them, reports the server's memory (--server-pid), runs the
// new-submission load beside them for --duration, then cancels them all at
// --cancel-rate and reports how long after each cancellation was sent its
// long-poll answered. A poll that answers still pending (its wait ran out)
// polls again, so no change can be missed.
func benchWaiters(ctx context.Context, cfg benchConfig, out io.Writer) error {
	run := newRunID()
	fmt.Fprintf(out, "scenario waiters: %s, %d waiters, tool %s\n", cfg.URL, cfg.Waiters, cfg.Tool)

	// 1. The pending actions, submitted by cfg.Clients workers.
	ids := make([]string, cfg.Waiters)
	errs := make(chan error, cfg.Clients)
	err := eachIndex(ctx, cfg, len(ids), func(client *benchClient, i int) bool {
		key := "bench:" + run + ":wait:" + strconv.Itoa(i)
		status, body, err := client.do(ctx, http.MethodPost, "/api/v1/actions", submitBody(cfg.Tool, key, payloadN(-1, i)), "")
		if err != nil || status != http.StatusCreated {
			errs <- fmt.Errorf("submit %d: %d %v %s", i, status, err, snippet(body))
			return false
		}
		var a struct{ ID, State string }
		if err := json.Unmarshal(body, &a); err != nil || a.State != "pending" {
			errs <- fmt.Errorf("submit %d answered %s (want a pending action; is %s an at-most-once tool?)", i, snippet(body), cfg.Tool)
			return false
		}
		ids[i] = a.ID
		return true
	})
	if err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	default:
	}

	// 2. One long-poll per action, each on its own connection.
	sent := make([]atomic.Int64, len(ids)) // unix ns at which its cancellation was sent
	woke := make([]int64, len(ids))        // unix ns at which its poll answered cancelled
	var polling, pollErrs atomic.Int64
	var samples sync.Map
	pctx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	var pw sync.WaitGroup
	for i, id := range ids {
		client, err := newBenchClient(cfg)
		if err != nil {
			return err
		}
		pw.Go(func() {
			defer client.close()
			for pctx.Err() == nil {
				polling.Add(1)
				status, body, err := client.do(pctx, http.MethodGet, "/api/v1/actions/"+id+"?wait=25s", nil, "")
				polling.Add(-1)
				if err != nil || status != http.StatusOK {
					if pctx.Err() == nil {
						pollErrs.Add(1)
						samples.LoadOrStore(status, fmt.Sprintf("poll answered %d %v: %s", status, err, snippet(body)))
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				if strings.Contains(string(body), `"state":"cancelled"`) {
					woke[i] = time.Now().UnixNano()
					return
				}
			}
		})
	}
	// Every poll is sent once polling holds them all and a second passed.
	for deadline := time.Now().Add(30 * time.Second); polling.Load() < int64(len(ids)) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	fmt.Fprintf(out, "  %d long-polls held (%d errors so far)\n", polling.Load(), pollErrs.Load())
	rss := func(label string) {
		if cfg.ServerPID == 0 {
			return
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cfg.ServerPID) + "/status")
		if err != nil {
			fmt.Fprintf(out, "  server memory: %v\n", err)
			return
		}
		var fields []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "VmHWM:") {
				f := strings.Fields(line)
				kb, _ := strconv.Atoi(f[1])
				fields = append(fields, fmt.Sprintf("%s %.1f MiB", strings.TrimSuffix(f[0], ":"), float64(kb)/1024))
			}
		}
		fmt.Fprintf(out, "  server memory %s: %s\n", label, strings.Join(fields, ", "))
	}
	rss("with the long-polls held")

	// 3. The new-submission load beside them.
	if cfg.Duration > 0 {
		load := cfg
		load.Scenario = "new"
		if err := benchCmdLoad(ctx, load, out); err != nil {
			return err
		}
		rss("after the load")
	}

	// 4. Cancel them all at cfg.CancelRate, and wait for the polls.
	start := time.Now()
	var cancelErrs atomic.Int64
	err = eachIndex(ctx, cfg, len(ids), func(client *benchClient, i int) bool {
		if due := start.Add(time.Duration(float64(i) / cfg.CancelRate * float64(time.Second))); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		sent[i].Store(time.Now().UnixNano())
		status, body, err := client.do(ctx, http.MethodPost, "/api/v1/actions/"+ids[i]+"/cancel", nil, "")
		if err != nil || status != http.StatusOK {
			cancelErrs.Add(1)
			samples.LoadOrStore("cancel", fmt.Sprintf("cancel answered %d %v: %s", status, err, snippet(body)))
		}
		return true
	})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { pw.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		stopPolls()
		<-done
	}
	var lat []time.Duration
	missed := 0
	for i := range ids {
		if woke[i] == 0 {
			missed++
			continue
		}
		lat = append(lat, time.Duration(max(0, woke[i]-sent[i].Load())))
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	fmt.Fprintf(out, "  cancelled %d at %.0f/s: woken after the cancellation was sent p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d not woken, %d poll errors, %d cancel errors\n",
		len(ids), cfg.CancelRate, q(0.5), q(0.99), q(1), missed, pollErrs.Load(), cancelErrs.Load())
	samples.Range(func(_, v any) bool { fmt.Fprintf(out, "  sample: %s\n", v); return true })
	fmt.Fprintf(out, "summary scenario=waiters waiters=%d woken=%d wake_p50_ms=%.1f wake_p99_ms=%.1f wake_max_ms=%.1f errors=%d\n",
		len(ids), len(lat), q(0.5), q(0.99), q(1), int64(missed)+pollErrs.Load()+cancelErrs.Load())
	return nil
}

// eachIndex runs fn for 0..n-1 on cfg.Clients workers, each with a
// connection of its own, until every index is done, ctx ends or fn
// returns false; it returns once every worker has stopped.
func eachIndex(ctx context.Context, cfg benchConfig, n int, fn func(client *benchClient, i int) bool) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	for range cfg.Clients {
		client, err := newBenchClient(cfg)
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer client.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil || !fn(client, i) {
					return
				}
			}
		})
	}
	return nil
}
