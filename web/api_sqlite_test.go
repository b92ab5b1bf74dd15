package web_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
)

// TestSQLiteUnderConcurrentWriters drives the embedded default through HTTP:
// one intent submitted by 100 callers at once, then 50 writers of different
// intents. SQLite must make writers wait, never fail: no "database is
// locked" (a 5xx) may reach a client.
func TestSQLiteUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := startAPISQLite(t)
	res := runConcurrently(100, func(int) resp {
		r, err := e.try(e.base, e.token, "POST", "/api/v1/actions", email("c-1", "welcome"))
		if err != nil {
			t.Error(err)
		}
		return r
	})
	created := 0
	for _, r := range res {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Errorf("one intent: status %d: %s", r.status, r.body)
		}
	}
	if created != 1 {
		t.Fatalf("one intent: %d created, want 1", created)
	}
	res = runConcurrently(50, func(i int) resp {
		body := refund(fmt.Sprintf("o-%d", i), 1)
		if i%2 == 0 {
			body = email(fmt.Sprintf("c-%d", i), "news")
		}
		r, err := e.try(e.base, e.token, "POST", "/api/v1/actions", body)
		if err != nil {
			t.Error(err)
		}
		if r.status == http.StatusCreated && i%2 == 1 {
			a := r.action(t)
			r, err = e.try(e.base, e.token, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"ok":true}}`)
			if err != nil {
				t.Error(err)
			}
		}
		return r
	})
	for i, r := range res {
		want := http.StatusCreated
		if i%2 == 1 {
			want = http.StatusOK // the complete after the claim
		}
		if r.status != want {
			t.Errorf("writer %d: status %d, want %d: %s", i, r.status, want, r.body)
		}
	}
	counts, err := e.store.ActionCountByState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[queue.StatePending] != 26 || counts[queue.StateDone] != 25 {
		t.Fatalf("stored %v; want 26 pending and 25 done", counts)
	}
}

// TestSQLiteLongPollAndReplay checks the in-process notifier behind ?wait
// and the replay path on the embedded store.
func TestSQLiteLongPollAndReplay(t *testing.T) {
	t.Parallel()
	e := startAPISQLite(t)
	a := e.do(e.base, e.token, "POST", "/api/v1/actions", email("c-2", "poll")).action(t)
	if r := e.do(e.base, e.token, "POST", "/api/v1/actions", email("c-2", "poll")); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", r.status, r.body)
	}
	done := make(chan resp, 1)
	go func() {
		r, err := e.try(e.base, e.token, "GET", "/api/v1/actions/"+a.ID+"?wait=60s", nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// Cancel once the poll waits (subscribed, action read pending); the
	// fallback re-read (a minute) and the poll's deadline (60 s) are later
	// than this test waits (30 s), so the commit's notification ends it.
	e.app.AwaitWaiters(t, 1)
	if r := e.do(e.base, e.token, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-done:
		if r.action(t).State != queue.StateCancelled {
			t.Fatalf("long-poll answered %s", r.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long-poll did not answer within 30 s of the cancel")
	}
}
