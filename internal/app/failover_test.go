package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// receiver is a webhook receiver that takes its time (so deliveries are in
// flight when the primary dies) and counts every delivery by webhook-id.
type receiver struct {
	mu       sync.Mutex
	hits     map[string]int
	answered map[string]bool // answered 200
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.hits[id]++
	r.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"ok": true}`)
	r.mu.Lock()
	r.answered[id] = true
	r.mu.Unlock()
}

// TestFailoverToASynchronousStandby runs agents' traffic through two
// processes on a primary with a synchronous standby (PostgreSQL's own
// initdb, pg_basebackup and pg_ctl), kills the primary mid-delivery,
// promotes the standby 8 s later (HA managers take 10-30 s by default;
// the dispatcher used to retry an outcome for about three), and checks docs/operations.md, "Replication and failover": every
// acknowledged submission is there, every answered delivery is done and was
// made once, every agent's complete sent during the outage is written
// without being sent again, nothing is left in progress and no ticket is
// opened, and both processes go on without a restart.
func TestFailoverToASynchronousStandby(t *testing.T) {
	t.Parallel()
	began := time.Now()
	pair := pgtest.NewPair(t)
	t.Logf("primary and synchronous standby ready in %v", time.Since(began).Round(time.Millisecond))

	rec := &receiver{hits: map[string]int{}, answered: map[string]bool{}}
	hook := httptest.NewServer(rec)
	defer hook.Close()
	reg, err := classify.Parse(fmt.Appendf(nil, `
tools:
  notify_auto:
    class: at-most-once
    intent: "auto:{n}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 30s }
    approval:
      policy:
        - { name: always, when: 'true', decide: approve }
  agent_task:
    class: at-most-once
    intent: "task:{n}"
    claim_timeout: 2m
    approval:
      policy:
        - { name: always, when: 'true', decide: approve }
`, hook.URL+"/hook"), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := apptest.Options{Tools: reg, WebhookSecret: "failover-secret", WaitRecheck: 2 * time.Second}
	first := apptest.StartOn(t, pair.URL, opts)
	procs := []*apptest.App{first, first.AddServer(t, nil)}
	token := first.Token(t, "agent")

	var (
		mu        sync.Mutex
		acked     []string // submissions answered 201
		completes []string // agent_task actions whose complete was sent once (whatever the answer)
		// agent_task actions whose execute went unanswered or was answered
		// 503: the agent cannot know whether it holds the claim, so it does
		// not act, and the action is the agent's to settle (the SDK's
		// retry budget), not the server's.
		unsure   = map[string]bool{}
		seq      atomic.Int64
		statuses = map[int]int{}
	)
	client := &http.Client{Timeout: 15 * time.Second}
	post := func(base, path string, body string) (int, []byte, error) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		mu.Lock()
		statuses[res.StatusCode]++
		mu.Unlock()
		if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After: %s", b)
		}
		return res.StatusCode, b, nil
	}
	ctx, stop := context.WithCancel(context.Background())
	var agents sync.WaitGroup
	for i := range 8 {
		base := procs[i%2].URL
		agents.Go(func() {
			for ctx.Err() == nil {
				n := seq.Add(1)
				tool := "notify_auto"
				if n%2 == 0 {
					tool = "agent_task"
				}
				// A submission without an answer may have committed: like the
				// SDKs, the agent sends the same one again (its intent makes
				// that safe) until it is answered, even once told to stop,
				// so that no action it submitted is left unknown to it.
				var (
					status int
					body   []byte
					err    error
				)
				for deadline := time.Now().Add(40 * time.Second); ; {
					status, body, err = post(base, "/api/v1/actions", fmt.Sprintf(`{"tool": %q, "payload": {"n": %d}}`, tool, n))
					if err == nil && (status == http.StatusCreated || status == http.StatusOK) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("submission %d not answered within 40s: %d %v %s", n, status, err, body)
						return
					}
					time.Sleep(200 * time.Millisecond) // the SDK waits as Retry-After says; enough here
				}
				var a queue.Action
				if err := json.Unmarshal(body, &a); err != nil {
					t.Errorf("submission answer: %v %s", err, body)
					continue
				}
				mu.Lock()
				acked = append(acked, a.ID)
				mu.Unlock()
				if tool != "agent_task" {
					continue
				}
				if status, _, err := post(base, "/api/v1/actions/"+a.ID+"/execute", `{}`); err != nil || status != http.StatusOK {
					mu.Lock()
					unsure[a.ID] = true
					mu.Unlock()
					continue
				}
				// One report, never repeated: during the outage it is
				// answered 503 and must still be written.
				status, _, err = post(base, "/api/v1/actions/"+a.ID+"/complete", `{"result": {"ok": true}}`)
				mu.Lock()
				switch {
				case err == nil && (status == http.StatusOK || status == http.StatusServiceUnavailable):
					completes = append(completes, a.ID)
				case err == nil:
					// A report refused for the outage is answered 503
					// (kept, and written once the database answers),
					// never 500: the agent would not know to wait.
					t.Errorf("complete of %s answered %d during the failover, want 200 or 503", a.ID, status)
				}
				mu.Unlock()
			}
		})
	}

	time.Sleep(3 * time.Second)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	killed := time.Now()
	pair.Primary.Crash(t) // every server process quits at once: deliveries are in flight
	time.Sleep(8 * time.Second)
	pair.Standby.Promote(t)
	promoted := time.Now()
	t.Logf("primary killed after %d acknowledged submissions; standby promoted %v later", before, promoted.Sub(killed).Round(time.Millisecond))

	// Both processes go on without a restart: a submission through each.
	for _, p := range procs {
		for deadline := time.Now().Add(20 * time.Second); ; {
			status, _, err := post(p.URL, "/api/v1/actions", fmt.Sprintf(`{"tool": "notify_auto", "payload": {"n": %d}}`, seq.Add(1)))
			if err == nil && status == http.StatusCreated {
				t.Logf("%s takes writes %v after the promotion", p.URL, time.Since(promoted).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s takes no writes 20s after the promotion: %d %v", p.URL, status, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)
	stop()
	agents.Wait()

	// Wait until nothing is approved or in progress: every delivery and
	// every kept outcome has landed.
	store := first.Store
	var open []*queue.Action
	for deadline := time.Now().Add(20 * time.Second); ; {
		open = nil
		for _, st := range []queue.State{queue.StateApproved, queue.StateInProgress} {
			l, err := store.ActionList(context.Background(), queue.ActionListParams{State: st, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, l...)
		}
		if len(open) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range open {
		if !unsure[a.ID] {
			t.Errorf("action %s (%s) is still %s after the failover", a.ID, a.Tool, a.State)
		}
	}
	for _, id := range acked {
		a, err := store.ActionGetByID(context.Background(), id)
		if err != nil {
			t.Errorf("acknowledged submission %s lost: %v", id, err)
			continue
		}
		if a.Tool == "notify_auto" && a.State != queue.StateDone {
			t.Errorf("delivery %s is %s, want done", id, a.State)
		}
	}
	for _, id := range completes {
		if a, err := store.ActionGetByID(context.Background(), id); err != nil || a.State != queue.StateDone {
			t.Errorf("complete of %s sent once is not written: %v %+v", id, err, a)
		}
	}
	rec.mu.Lock()
	for id, n := range rec.hits {
		if n != 1 {
			t.Errorf("action %s delivered %d times", id, n)
		}
		a, err := store.ActionGetByID(context.Background(), id)
		if rec.answered[id] && (err != nil || a.State != queue.StateDone) {
			t.Errorf("delivery %s answered 200 is not done: %v %+v", id, err, a)
		}
	}
	deliveries := len(rec.hits)
	rec.mu.Unlock()
	// The sweep, past every claim_timeout, opens a ticket for what an
	// operator must settle: nothing.
	first.Clock.Advance(5 * time.Minute)
	if _, err := first.Sweeper.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	tickets, err := store.TicketList(context.Background(), queue.TicketListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tickets {
		if !unsure[tk.ActionID] {
			t.Errorf("ticket %s on action %s after the failover: the server could have settled it", tk.ID, tk.ActionID)
		}
	}
	t.Logf("%d acknowledged submissions, %d deliveries, %d completes, %d executes the agents could not be sure of, %d tickets; answers by status %v; %v in all",
		len(acked), deliveries, len(completes), len(unsure), len(tickets), statuses, time.Since(began).Round(time.Millisecond))
	if len(acked) <= before || deliveries == 0 || len(completes) == 0 {
		t.Errorf("too little traffic to show anything: %d submissions (%d before the kill), %d deliveries, %d completes", len(acked), before, deliveries, len(completes))
	}
}
