package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// unknownOutcome is an upstream whose every call ends with no answer (a
// crashed server): the outcome is unknown.
type unknownOutcome struct{ calls int }

func (u *unknownOutcome) CallUpstream(context.Context, *queue.Action) queue.Execution {
	u.calls++
	return queue.Execution{Outcome: queue.ExecutionUnknown, Error: "the connection was lost during the call"}
}

// A retry of an intent whose upstream call is in progress with an unknown
// outcome is told so (409 in_progress: do not act), even when the upstream
// is down by then, and even when a later at-least-once call (which holds
// nothing) used the same key; only an intent nothing holds is refused as
// unavailable.
func TestUpstreamDownStillAnswersTheHeldIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, err := classify.Parse([]byte(`
upstreams:
  pay: { url: "http://127.0.0.1:1/mcp" }
tools:
  pay_refund:
    upstream: pay
    upstream_tool: refund
    class: exactly-once
    intent: "refund:{order}"
  pay_lookup:
    upstream: pay
    upstream_tool: lookup
    class: at-least-once
`), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up, err := file.Import(map[string]classify.UpstreamListing{"pay": {Tools: []classify.UpstreamTool{{Name: "refund"}, {Name: "lookup"}}}})
	if err != nil {
		t.Fatal(err)
	}
	down, err := file.Import(map[string]classify.UpstreamListing{"pay": {Unavailable: "connection refused"}})
	if err != nil {
		t.Fatal(err)
	}
	caller := &unknownOutcome{}
	env := apptest.NewEnv(t, apptest.EnvOptions{Tools: up, Service: queue.Options{Upstream: caller}})
	svc := env.Service
	submit := func(order string) (queue.SubmitResult, error) {
		return svc.Submit(ctx, queue.SubmitRequest{Tool: "pay_refund", Payload: []byte(`{"order":"` + order + `"}`), Agent: "bot"})
	}
	first, err := submit("o-1")
	if err != nil || first.Action.State != queue.StateInProgress {
		t.Fatalf("first call: %+v, %v; want in_progress (outcome unknown)", first.Action, err)
	}
	// A newer action of the key that holds nothing.
	look, err := svc.Submit(ctx, queue.SubmitRequest{Tool: "pay_lookup", Payload: []byte(`{"order":"o-1"}`), IntentKey: "refund:o-1", Agent: "bot"})
	if err != nil || !look.Created || look.Action.Class != classify.AtLeastOnce {
		t.Fatalf("at-least-once call with the key: %+v, %v", look.Action, err)
	}
	env.CurrentTools.Store(down)
	var qe *queue.Error
	if _, err := submit("o-1"); !errors.As(err, &qe) || qe.Code != queue.CodeInProgress {
		t.Fatalf("retry of the held intent with the upstream down: %v, want in_progress", err)
	}
	if _, err := submit("o-2"); !errors.As(err, &qe) || qe.Code != queue.CodeUpstreamUnavailable {
		t.Fatalf("a new intent with the upstream down: %v, want upstream_unavailable", err)
	}
	if caller.calls != 2 {
		t.Fatalf("%d upstream calls, want 2 (the refund and the lookup)", caller.calls)
	}
}
