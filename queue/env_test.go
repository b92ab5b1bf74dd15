package queue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// testEnv is one database, as several server processes would share it,
// with a service over it and the clock every service of the test uses.
type testEnv struct {
	t     *testing.T
	url   string
	store *postgres.Store
	svc   *queue.Service
	reg   *classify.Registry
	clock *testclock.Clock
}

const envTools = `
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    claim_timeout: 10m
    expires_after: 1h
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
`

// startEnv starts a test environment whose clock follows real time until
// advanced.
func startEnv(t *testing.T) *testEnv {
	t.Helper()
	return startEnvClock(t, testclock.Running())
}

// startEnvFrozen is startEnv with a frozen clock.
func startEnvFrozen(t *testing.T) *testEnv {
	t.Helper()
	return startEnvClock(t, testclock.Frozen())
}

func startEnvClock(t *testing.T, clock *testclock.Clock) *testEnv {
	t.Helper()
	reg, err := classify.Parse([]byte(envTools), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, url: pgtest.URL(t), clock: clock, reg: reg}
	e.store = pgtest.OpenURL(t, e.url)
	e.svc = queue.NewService(e.store, e.reg, queue.Options{Now: e.clock.Now, WaitRecheck: time.Minute})
	t.Cleanup(e.svc.Stop)
	return e
}

// addService opens another store (its own pool and LISTEN connection) on
// the same database: another server process.
func (e *testEnv) addService() *queue.Service {
	svc := queue.NewService(pgtest.OpenURL(e.t, e.url), e.reg, queue.Options{Now: e.clock.Now, WaitRecheck: time.Minute})
	e.t.Cleanup(svc.Stop)
	return svc
}

func (e *testEnv) submit(tool string, payload map[string]any) *queue.Action {
	e.t.Helper()
	raw, _ := json.Marshal(payload)
	res, err := e.svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
	if err != nil || !res.Created {
		e.t.Fatalf("submit %s %s: %v %+v", tool, raw, err, res)
	}
	return res.Action
}

func (e *testEnv) approve(svc *queue.Service, id string) *queue.Action {
	e.t.Helper()
	res, err := svc.Approve(context.Background(), queue.DecideRequest{ID: id, By: "user:ann@example.com"})
	if err != nil {
		e.t.Fatalf("approve %s: %v", id, err)
	}
	return res.Action
}

func (e *testEnv) eventCount(id, kind string) int {
	e.t.Helper()
	evs, err := e.svc.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// awaitWaiters returns once at least n long-polls of svc have subscribed,
// read their action and wait for a change; the services of these tests
// re-read only every minute, so what ends such a wait is the change itself.
func awaitWaiters(t *testing.T, svc *queue.Service, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for svc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d long-polls waiting after 30s, want %d", svc.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
