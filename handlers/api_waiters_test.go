package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/longpoll"
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
			e := apptest.StartAPI(t, apptest.Options{SQLite: onSQLite, Waiters: longpoll.WaiterLimits{Total: 2, PerHolder: 1}})
			svc := e.Service
			bot, third := e.AgentToken, e.Token(e.T, "third")

			a := e.Do(e.URL, bot, "POST", "/api/v1/actions", apptest.EmailBody("c-wait", "t")).Action(t)
			path := "/api/v1/actions/" + a.ID
			first := make(chan resp, 1)
			go func() {
				r, err := e.Try(e.URL, bot, "GET", path+"?wait=50s", nil)
				if err != nil {
					t.Error(err)
				}
				first <- r
			}()
			// The first long-poll holds its slot and waits on the pending
			// action (the approvals_waiters gauge).
			e.App.AwaitWaiters(t, 1)

			r := e.Do(e.URL, bot, "GET", path+"?wait=1s", nil)
			if r.Status != http.StatusTooManyRequests || r.Problem(t).Code != queue.CodeTooManyWaiters || r.Header.Get("Retry-After") == "" {
				t.Fatalf("second long-poll of one token: %d %v %s, want 429 too_many_waiters with Retry-After", r.Status, r.Header, r.Body)
			}
			if r := e.Do(e.URL, bot, "GET", path, nil); r.Status != http.StatusOK {
				t.Fatalf("read without wait: %d %s", r.Status, r.Body)
			}
			// Another token may wait; with it waiting, the total is reached.
			release, err := e.Polls.AcquireWaiter("agent:other")
			if err != nil {
				t.Fatal(err)
			}
			if r := e.Do(e.URL, third, "GET", path+"?wait=1s", nil); r.Status != http.StatusTooManyRequests {
				t.Fatalf("past the total: %d %s, want 429", r.Status, r.Body)
			}
			release()

			if _, err := svc.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			if r := <-first; r.Status != http.StatusOK || r.Action(t).State != queue.StateApproved {
				t.Fatalf("first long-poll: %d %s", r.Status, r.Body)
			}
			// The handler gives its slot back after its answer is written,
			// which the client may read first.
			e.App.AwaitWaiters(t, 0)
			if r := e.Do(e.URL, bot, "GET", path+"?wait=1ms", nil); r.Status != http.StatusOK {
				t.Fatalf("after the first long-poll ended: %d %s, want 200", r.Status, r.Body)
			}
		})
	}
}
