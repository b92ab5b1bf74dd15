package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// Over REST a change request ends ?wait at once, final for the attempt;
// the tools' guidance says what to do next, and the same key submitted
// again starts attempt 2, pending a fresh approval.
func TestChangesRequestedThroughREST(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-cr", "revise")).Action(t)
	polled := make(chan resp, 1)
	go func() {
		r, err := e.Try(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=30s&state=pending", nil)
		if err != nil {
			t.Error(err)
		}
		polled <- r
	}()
	if _, err := e.Service.Decide(context.Background(), queue.DecideRequest{To: queue.StateChangesRequested, ID: a.ID, By: "user:ann@example.com", Note: "Use the customer's first name"}); err != nil {
		t.Fatal(err)
	}
	var r resp
	select {
	case r = <-polled:
	case <-time.After(20 * time.Second):
		t.Fatal("?wait did not answer after the change request")
	}
	got := r.Action(t)
	if got.State != queue.StateChangesRequested || got.DecisionNote == nil || *got.DecisionNote != "Use the customer's first name" {
		t.Fatalf("long-poll: %s", r.Body)
	}
	start := time.Now()
	if r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=30s", nil); r.Action(t).State != queue.StateChangesRequested || time.Since(start) > 5*time.Second {
		t.Fatalf("wait on changes_requested: %s after %s", r.Body, time.Since(start))
	}
	var tools struct {
		Guidance string
		Tools    []struct{ Name, Guidance string }
	}
	if err := json.Unmarshal(e.Do(e.URL, e.AgentToken, "GET", "/api/v1/tools", nil).Body, &tools); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tools.Guidance, "same intent key") {
		t.Errorf("guidance %q does not say what to do after a change request", tools.Guidance)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "send_customer_email" && !strings.Contains(tl.Guidance, "revise the payload as the note") {
			t.Errorf("tool guidance %q", tl.Guidance)
		}
	}
	if next := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-cr", "revise")).Action(t); next.Attempt != 2 || next.State != queue.StatePending {
		t.Fatalf("resubmission: attempt %d %s", next.Attempt, next.State)
	}
}
