package handlers_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestSQLiteUnderConcurrentWriters drives the embedded default through HTTP:
// one intent submitted by 100 callers at once, then 50 writers of different
// intents. SQLite must make writers wait, never fail: no "database is
// locked" (a 5xx) may reach a client.
func TestSQLiteUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{SQLite: true})
	res := apptest.RunConcurrently(100, func(int) resp {
		r, err := e.Try(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-1", "welcome"))
		if err != nil {
			t.Error(err)
		}
		return r
	})
	created := 0
	for _, r := range res {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Errorf("one intent: status %d: %s", r.Status, r.Body)
		}
	}
	if created != 1 {
		t.Fatalf("one intent: %d created, want 1", created)
	}
	res = apptest.RunConcurrently(50, func(i int) resp {
		body := apptest.RefundBody(fmt.Sprintf("o-%d", i), 1)
		if i%2 == 0 {
			body = apptest.EmailBody(fmt.Sprintf("c-%d", i), "news")
		}
		r, err := e.Try(e.URL, e.AgentToken, "POST", "/api/v1/actions", body)
		if err != nil {
			t.Error(err)
		}
		if r.Status == http.StatusCreated && i%2 == 1 {
			a := r.Action(t)
			r, err = e.Try(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"ok":true}}`)
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
		if r.Status != want {
			t.Errorf("writer %d: status %d, want %d: %s", i, r.Status, want, r.Body)
		}
	}
	counts, err := e.Store.ActionCountByState(t.Context())
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
	e := apptest.StartAPI(t, apptest.Options{SQLite: true})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-2", "poll")).Action(t)
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-2", "poll")); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	done := make(chan resp, 1)
	go func() {
		r, err := e.Try(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=60s", nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// Cancel once the poll waits (subscribed, action read pending); the
	// fallback re-read (a minute) and the poll's deadline (60 s) are later
	// than this test waits (30 s), so the commit's notification ends it.
	e.App.AwaitWaiters(t, 1)
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	select {
	case r := <-done:
		if r.Action(t).State != queue.StateCancelled {
			t.Fatalf("long-poll answered %s", r.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long-poll did not answer within 30 s of the cancel")
	}
}
