package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/web"
)

// TestWaiterCap: with APPROVALS_MAX_WAITERS at 2 in all and 1 per token, a
// second long-poll of one token while its first is waiting is 429
// too_many_waiters with Retry-After, a read without wait still answers, and
// the slot is free again once the first long-poll ends. The spy store says
// when the first long-poll is waiting, so nothing depends on timing.
func TestWaiterCap(t *testing.T) {
	t.Parallel()
	for name, st := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spy := &waitSpy{Store: st, waiting: make(chan queue.State, 1)}
			svc := queue.NewService(spy, exampleRegistry(t), queue.Options{WaitRecheck: time.Minute,
				Waiters: queue.WaiterLimits{Total: 2, PerHolder: 1}})
			t.Cleanup(svc.Stop)
			srv, err := web.New(web.Config{Service: svc, Accounts: st})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			e := &apiEnv{t: t, store: st, client: &http.Client{Timeout: time.Minute}}
			bot, third := e.newToken("bot"), e.newToken("third")

			a := e.do(hs.URL, bot, "POST", "/api/v1/actions", email("c-wait", "t")).action(t)
			path := "/api/v1/actions/" + a.ID
			first := make(chan resp, 1)
			go func() { first <- e.do(hs.URL, bot, "GET", path+"?wait=50s", nil) }()
			if st := <-spy.waiting; st != queue.StatePending {
				t.Fatalf("first long-poll read %s", st)
			}

			r := e.do(hs.URL, bot, "GET", path+"?wait=1s", nil)
			if r.status != http.StatusTooManyRequests || r.problem(t).Code != queue.CodeTooManyWaiters || r.header.Get("Retry-After") == "" {
				t.Fatalf("second long-poll of one token: %d %v %s, want 429 too_many_waiters with Retry-After", r.status, r.header, r.body)
			}
			if r := e.do(hs.URL, bot, "GET", path, nil); r.status != http.StatusOK {
				t.Fatalf("read without wait: %d %s", r.status, r.body)
			}
			// Another token may wait; with it waiting, the total is reached.
			release, err := svc.AcquireWaiter("agent:other")
			if err != nil {
				t.Fatal(err)
			}
			if r := e.do(hs.URL, third, "GET", path+"?wait=1s", nil); r.status != http.StatusTooManyRequests {
				t.Fatalf("past the total: %d %s, want 429", r.status, r.body)
			}
			release()

			if _, err := svc.Approve(context.Background(), queue.DecideRequest{ID: a.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			if r := <-first; r.status != http.StatusOK || r.action(t).State != queue.StateApproved {
				t.Fatalf("first long-poll: %d %s", r.status, r.body)
			}
			if r := e.do(hs.URL, bot, "GET", path+"?wait=1ms", nil); r.status != http.StatusOK {
				t.Fatalf("after the first long-poll ended: %d %s, want 200", r.status, r.body)
			}
		})
	}
}
