package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestWaiterCap: with APPROVALS_MAX_WAITERS at 2 in all and 1 per token, a
// second long-poll of one token while its first is waiting is 429
// too_many_waiters with Retry-After, a read without wait still answers, and
// the slot is free again once the first long-poll ends. The waiters gauge
// says when the first long-poll is waiting, so nothing depends on timing.
func TestWaiterCap(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startAPIWith(t, apptest.Options{SQLite: onSQLite, Waiters: queue.WaiterLimits{Total: 2, PerHolder: 1}})
			svc := e.svc
			bot, third := e.token, e.newToken("third")

			a := e.do(e.base, bot, "POST", "/api/v1/actions", email("c-wait", "t")).action(t)
			path := "/api/v1/actions/" + a.ID
			first := make(chan resp, 1)
			go func() {
				r, err := e.try(e.base, bot, "GET", path+"?wait=50s", nil)
				if err != nil {
					t.Error(err)
				}
				first <- r
			}()
			// The first long-poll holds its slot and waits on the pending
			// action (the approvals_waiters gauge).
			e.app.AwaitWaiters(t, 1)

			r := e.do(e.base, bot, "GET", path+"?wait=1s", nil)
			if r.status != http.StatusTooManyRequests || r.problem(t).Code != queue.CodeTooManyWaiters || r.header.Get("Retry-After") == "" {
				t.Fatalf("second long-poll of one token: %d %v %s, want 429 too_many_waiters with Retry-After", r.status, r.header, r.body)
			}
			if r := e.do(e.base, bot, "GET", path, nil); r.status != http.StatusOK {
				t.Fatalf("read without wait: %d %s", r.status, r.body)
			}
			// Another token may wait; with it waiting, the total is reached.
			release, err := svc.AcquireWaiter("agent:other")
			if err != nil {
				t.Fatal(err)
			}
			if r := e.do(e.base, third, "GET", path+"?wait=1s", nil); r.status != http.StatusTooManyRequests {
				t.Fatalf("past the total: %d %s, want 429", r.status, r.body)
			}
			release()

			if _, err := svc.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			if r := <-first; r.status != http.StatusOK || r.action(t).State != queue.StateApproved {
				t.Fatalf("first long-poll: %d %s", r.status, r.body)
			}
			if r := e.do(e.base, bot, "GET", path+"?wait=1ms", nil); r.status != http.StatusOK {
				t.Fatalf("after the first long-poll ended: %d %s, want 200", r.status, r.body)
			}
		})
	}
}
