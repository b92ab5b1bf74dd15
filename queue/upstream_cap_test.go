package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// blockingUpstream holds every call until release is closed.
type blockingUpstream struct {
	started chan struct{}
	release chan struct{}
}

func (u *blockingUpstream) CallUpstream(context.Context, *queue.Action) queue.Execution {
	u.started <- struct{}{}
	<-u.release
	return queue.Execution{Outcome: queue.ExecutionDone, Result: json.RawMessage(`{"content":[],"isError":false}`)}
}

// Submissions that call their upstream at once are capped
// (MaxUpstreamCalls): past it the submission is too_many_upstream_calls
// (429 with Retry-After) and nothing is stored; at-most-once submissions,
// which call nothing, are not counted; once a call ends, a slot is free.
func TestUpstreamCallsAtSubmissionCapped(t *testing.T) {
	t.Parallel()
	reg := atLeastOnceRegistry(t)
	up := &blockingUpstream{started: make(chan struct{}, 2), release: make(chan struct{})}
	e := apptest.NewEnv(t, apptest.EnvOptions{Tools: reg, Service: queue.Options{Upstream: up, MaxUpstreamCalls: 2}})
	st, svc := e.Store, e.Service
	ctx := context.Background()
	submit := func(tool, key string) (queue.SubmitResult, error) {
		return svc.Submit(ctx, queue.SubmitRequest{Tool: tool, Payload: json.RawMessage(`{"k":"` + key + `"}`), IntentKey: key, Agent: "bot"})
	}
	done := make(chan error, 2)
	for _, key := range []string{"a", "b"} {
		go func() { _, err := submit("crm_lookup", key); done <- err }()
	}
	<-up.started
	<-up.started
	_, err := submit("crm_pay", "pay:c")
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != queue.CodeTooManyUpstreamCalls {
		t.Fatalf("a third call while two run: %v, want too_many_upstream_calls", err)
	}
	if list, err := st.ActionList(ctx, queue.ActionListParams{IntentKey: "pay:c", Limit: 5}); err != nil || len(list) != 0 {
		t.Fatalf("the refused submission stored %d actions (%v)", len(list), err)
	}
	close(up.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if res, err := submit("crm_pay", "pay:c"); err != nil || !res.Created {
		t.Fatalf("once the calls ended: %+v, %v; want the call made", res, err)
	}
}
