package executor_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/executor"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// autoTools are a webhook tool whose policy approves everything at
// submission and one a person approves, both delivered to hook.
func autoTools(t *testing.T, hook string) *classify.Registry {
	t.Helper()
	reg, err := classify.Parse(fmt.Appendf(nil, `
tools:
  notify_auto:
    class: at-most-once
    intent: "auto:{topic}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 30s }
    approval:
      policy:
        - { name: always, when: 'true', decide: approve }
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}:{topic}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 30s }
`, hook, hook), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// startAutoExec is startExec (PostgreSQL) with autoTools.
func startAutoExec(t *testing.T) *execEnv {
	t.Helper()
	e := &execEnv{prov: newProvider(t)}
	e.Env = apptest.NewEnv(t, apptest.EnvOptions{Tools: autoTools(t, e.prov.srv.URL+"/hook")})
	t.Cleanup(func() { e.prov.check(t) })
	return e
}

// An action a policy rule approves within its submission changes no state
// afterwards, so no notification announces it; the submitting process
// wakes its own dispatcher. With the slow rescan an hour away, only that
// wake-up can deliver it.
func TestApprovedAtSubmissionWakesTheDispatcher(t *testing.T) {
	t.Parallel()
	e := startAutoExec(t)
	e.runDispatcherConfig(e.Service, executor.WebhookConfig{Recheck: time.Hour})
	// Let the dispatcher's first scan pass, so it is not what delivers.
	time.Sleep(200 * time.Millisecond)
	a := e.Submit("notify_auto", map[string]any{"topic": "wake", "respond": "json"})
	if a.State != queue.StateApproved {
		t.Fatalf("the policy did not approve it at submission: %s", a.State)
	}
	select {
	case id := <-e.prov.arrived:
		if id != a.ID {
			t.Fatalf("delivered %s, want %s", id, a.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an action approved at submission was not delivered within 10s: only the rescan (an hour away) would find it")
	}
	e.waitState(a.ID, queue.StateDone)
}

// TestDeliveryLatencyApprovedAtSubmission measures, side by side, how long a
// webhook delivery takes from the request that approved the action: a
// person's approval, and a policy rule's approval within the submission.
// It logs the figures (docs/operations.md quotes them) and asserts only
// that every action was delivered once, not how fast: timings on a shared
// machine are not a test.
func TestDeliveryLatencyApprovedAtSubmission(t *testing.T) {
	t.Parallel()
	e := startAutoExec(t)
	// The production rescan (10s), not the tests' usual 1s.
	e.runDispatcherConfig(e.Service, executor.WebhookConfig{Recheck: 10 * time.Second})
	const n = 20
	var mu sync.Mutex
	began := map[string]time.Time{}
	arrivedAt := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.After(30 * time.Second)
		for got := 0; got < 2*n; {
			select {
			case id := <-e.prov.arrived:
				at := time.Now()
				mu.Lock()
				if _, ok := arrivedAt[id]; !ok {
					arrivedAt[id] = at
					got++
				}
				mu.Unlock()
			case <-deadline:
				return
			}
		}
	}()
	var person, policy []string
	for i := range n {
		// A person's approval: timed from the approval's request.
		p := e.Submit("notify_partner", map[string]any{"partner": "acme", "topic": fmt.Sprint("p", i), "respond": "json"})
		mu.Lock()
		began[p.ID] = time.Now()
		mu.Unlock()
		apptest.Approve(t, e.Service, p.ID)
		person = append(person, p.ID)
		// A rule's approval: timed from the submission's request (its id
		// is known only once the submission returns).
		start := time.Now()
		a := e.Submit("notify_auto", map[string]any{"topic": fmt.Sprint("a", i), "respond": "json"})
		mu.Lock()
		began[a.ID] = start
		mu.Unlock()
		policy = append(policy, a.ID)
		time.Sleep(50 * time.Millisecond)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	stats := func(ids []string) (p50, p99, mx time.Duration) {
		var ds []time.Duration
		for _, id := range ids {
			at, ok := arrivedAt[id]
			if !ok {
				t.Errorf("action %s was never delivered", id)
				continue
			}
			ds = append(ds, at.Sub(began[id]))
		}
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		return ds[len(ds)/2], ds[(len(ds)*99)/100], ds[len(ds)-1]
	}
	pp50, pp99, pmax := stats(person)
	ap50, ap99, amax := stats(policy)
	t.Logf("webhook delivery from the approving request, %d each:", n)
	t.Logf("  approved by a person:          p50 %v  p99 %v  max %v", pp50, pp99, pmax)
	t.Logf("  approved by a rule at submit:  p50 %v  p99 %v  max %v", ap50, ap99, amax)
	for _, id := range append(person, policy...) {
		if got := e.prov.deliveries(id); got != 1 {
			t.Errorf("action %s delivered %d times, want once", id, got)
		}
	}
}
