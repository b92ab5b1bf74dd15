package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchDeliver is the deliver scenario (issue 29's two delivery latencies).
// It listens on --receiver, where the server's tools file must point a
// webhook channel (path /events, told of action.pending) used by
// --tool's approval.notify, and the webhook executor of --executor-tool
// (path /execute). Then:
//  1. it submits --tool actions at --rate for --duration and times, for
//     each, from sending its submission to the channel receiving its
//     action.pending;
//  2. it submits as many --executor-tool actions (untimed), then approves
//     them in the dashboard at --rate (POST /actions/{id}/approve with the
//     approver's --cookie and --csrf) and times, for each, from sending the
//     approval to the executor receiving its delivery.
//
// Both are timed from the request's start, not its answer: the receiver
// may be told before the answer reaches the client.
func benchDeliver(ctx context.Context, cfg benchConfig, out io.Writer) error {
	rec := newDeliveryReceiver()
	ln, err := net.Listen("tcp", cfg.Receiver)
	if err != nil {
		return fmt.Errorf("--receiver %s: %w", cfg.Receiver, err)
	}
	srv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	client := &http.Client{
		Timeout: benchRequestTimeout,
		// The dashboard answers an approval with 303 to the action's page:
		// that answer is the approval's, not a page to fetch.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{MaxIdleConnsPerHost: cfg.Clients},
	}
	defer client.CloseIdleConnections()
	run := newRunID()
	n := max(1, int(cfg.Rate*cfg.Duration.Seconds()))

	submit := func(tool string, i int) (string, error) {
		body := submitBody(tool, "bench:"+run+":"+tool+":"+strconv.Itoa(i), payloadN(-1, i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/api/v1/actions", strings.NewReader(string(body)))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
		req.Header.Set("Content-Type", "application/json")
		status, b, err := roundTrip(client, req)
		if err != nil {
			return "", err
		}
		var a struct{ ID, State string }
		if status != http.StatusCreated || json.Unmarshal(b, &a) != nil || a.State != "pending" {
			return "", fmt.Errorf("submit %s answered %d %s (want 201 and a pending action)", tool, status, snippet(b))
		}
		return a.ID, nil
	}

	// 1. Submission → the channel's action.pending.
	fmt.Fprintf(out, "scenario deliver: %s, receiver %s, %d submissions of %s at %.0f/s\n", cfg.URL, cfg.Receiver, n, cfg.Tool, cfg.Rate)
	sent, errs := paced(ctx, n, cfg.Rate, func(i int) (string, error) { return submit(cfg.Tool, i) })
	if len(sent) == 0 {
		return fmt.Errorf("no submission succeeded: %v", errors.Join(errs...))
	}
	printDelivery(out, "deliver-channel", "submission sent → action.pending received", sent, rec.wait(rec.events, sent, 10*time.Second), errs)

	// 2. Approval in the dashboard → the executor's delivery.
	if cfg.ExecutorTool == "" {
		return nil
	}
	if cfg.Cookie == "" || cfg.CSRF == "" {
		return errors.New("deliver: --cookie and --csrf (an approver's dashboard session) are needed to approve; or leave out --executor-tool")
	}
	ids := make([]string, n)
	for i := range ids {
		if ids[i], err = submit(cfg.ExecutorTool, i); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "scenario deliver: %d approvals of %s at %.0f/s in the dashboard\n", n, cfg.ExecutorTool, cfg.Rate)
	// When each approval's own answer came, to tell its share of the time
	// from the dispatcher's.
	var answeredMu sync.Mutex
	answered := make(map[string]time.Time, n)
	approved, errs := paced(ctx, n, cfg.Rate, func(i int) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/actions/"+ids[i]+"/approve",
			strings.NewReader(url.Values{"note": {"bench"}}.Encode()))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", cfg.Cookie)
		req.Header.Set("X-CSRF-Token", cfg.CSRF)
		status, b, err := roundTrip(client, req)
		if err != nil {
			return "", err
		}
		if status != http.StatusSeeOther {
			return "", fmt.Errorf("approve answered %d %s (want 303)", status, snippet(b))
		}
		answeredMu.Lock()
		answered[ids[i]] = time.Now()
		answeredMu.Unlock()
		return ids[i], nil
	})
	printDelivery(out, "deliver-approve", "approval sent → its answer (303) received", approved, answered, nil)
	printDelivery(out, "deliver-executor", "approval sent → executor received the delivery", approved,
		rec.wait(rec.executions, approved, 10*time.Second), errs)
	return nil
}

func roundTrip(client *http.Client, req *http.Request) (int, []byte, error) {
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b, err
}

// paced calls fn(i) for i in 0..n-1, starting call i at i/rate seconds
// (each in its own goroutine, so a slow answer delays no later start), and
// returns when each id fn returned was sent, and fn's errors.
func paced(ctx context.Context, n int, rate float64, fn func(i int) (string, error)) (map[string]time.Time, []error) {
	var (
		mu   sync.Mutex
		sent = make(map[string]time.Time, n)
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return sent, append(errs, ctx.Err())
			case <-time.After(wait):
			}
		}
		wg.Go(func() {
			at := time.Now()
			id, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			sent[id] = at
		})
	}
	wg.Wait()
	return sent, errs
}

// printDelivery prints the latencies of the ids in sent that arrived, and a
// summary line; an id that did not arrive counts as an error.
func printDelivery(out io.Writer, scenario, what string, sent, arrived map[string]time.Time, errs []error) {
	var lat []time.Duration
	for id, at := range sent {
		if got, ok := arrived[id]; ok {
			lat = append(lat, max(0, got.Sub(at)))
		}
	}
	s := summarize(lat)
	missing := len(sent) - len(lat)
	fmt.Fprintf(out, "  %s: %d of %d, p50 %s ms, p95 %s ms, p99 %s ms, max %s ms; %d missing, %d errors\n",
		what, s.N, len(sent), ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), missing, len(errs))
	for i, err := range errs {
		if i == 3 {
			break
		}
		fmt.Fprintf(out, "  sample: %v\n", err)
	}
	fmt.Fprintf(out, "summary scenario=%s ops=%d p50_ms=%s p95_ms=%s p99_ms=%s max_ms=%s errors=%d\n",
		scenario, s.N, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), missing+len(errs))
}

// deliveryReceiver records when each action's first action.pending event
// (POST /events) and first execution (POST /execute, X-Approvals-Action)
// arrived. It answers every request 200, as a receiver that took it.
type deliveryReceiver struct {
	mu                 sync.Mutex
	changed            *sync.Cond
	events, executions map[string]time.Time
}

func newDeliveryReceiver() *deliveryReceiver {
	r := &deliveryReceiver{events: map[string]time.Time{}, executions: map[string]time.Time{}}
	r.changed = sync.NewCond(&r.mu)
	return r
}

func (r *deliveryReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var into map[string]time.Time
	var id string
	switch req.URL.Path {
	case "/events":
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Action struct {
					ID string `json:"id"`
				} `json:"action"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &ev) == nil && ev.Type == "action.pending" {
			into, id = r.events, ev.Data.Action.ID
		}
	case "/execute":
		into, id = r.executions, req.Header.Get("X-Approvals-Action")
	}
	if id != "" {
		r.mu.Lock()
		if _, seen := into[id]; !seen {
			into[id] = at
		}
		r.changed.Broadcast()
		r.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// wait waits up to timeout for every id of sent to be in m (events or
// executions), and returns a copy of what arrived.
func (r *deliveryReceiver) wait(m, sent map[string]time.Time, timeout time.Duration) map[string]time.Time {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() { r.mu.Lock(); r.changed.Broadcast(); r.mu.Unlock() })
	defer stop.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		all := true
		for id := range sent {
			if _, ok := m[id]; !ok {
				all = false
				break
			}
		}
		if all || !time.Now().Before(deadline) {
			break
		}
		r.changed.Wait()
	}
	out := make(map[string]time.Time, len(m))
	for id, at := range m {
		out[id] = at
	}
	return out
}
