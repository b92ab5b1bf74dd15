package queue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

const routingTools = `
groups:
  leads: [ann@example.com, bob@example.com, cara@example.com]
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
      required: 2
  post_update:
    class: at-most-once
    intent: "post:{topic}"
`

// onBothStores runs fn against a Service over SQLite and one over
// PostgreSQL, with the routing tools and a fixed clock.
func onBothStores(t *testing.T, fn func(t *testing.T, svc *queue.Service, st queue.Store)) {
	t.Helper()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, routingTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) { fn(t, e.Service, e.Store) })
}

func submitPending(t *testing.T, svc *queue.Service, tool, topic string) *queue.Action {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"customer_id": "c-1", "topic": topic})
	res, err := svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
	if err != nil || !res.Created || res.Action.State != queue.StatePending {
		t.Fatalf("submit %s: %v %+v", tool, err, res)
	}
	return res.Action
}

func TestQuorumThroughTheService(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, svc *queue.Service, st queue.Store) {
		ctx := t.Context()
		a := submitPending(t, svc, "send_customer_email", "quorum")
		if a.ApprovalsRequired != 2 || a.Approvals == nil || len(a.Approvals) != 0 {
			t.Fatalf("new action: approvals_required %d, approvals %v", a.ApprovalsRequired, a.Approvals)
		}
		// Outside the group: forbidden, nothing changes.
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:mallory@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("approval by an outsider: %v, want forbidden", err)
		}
		// Under a quorum the content N people approve must be the same.
		edited := json.RawMessage(`{"customer_id":"c-1","topic":"quorum","extra":1}`)
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com", Payload: edited}); queue.ErrorCode(err) != queue.CodeInvalidPayload {
			t.Fatalf("edited approval under a quorum: %v, want invalid_payload", err)
		}
		res, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com", Note: "fine"})
		if err != nil || res.Replayed || res.Action.State != queue.StatePending || len(res.Action.Approvals) != 1 {
			t.Fatalf("first approval: %v %+v", err, res)
		}
		res, err = svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"})
		if err != nil || !res.Replayed || len(res.Action.Approvals) != 1 {
			t.Fatalf("same user again: %v replayed=%v, want a replay that counts once", err, res.Replayed)
		}
		res, err = svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:bob@example.com", Channel: "slack"})
		if err != nil || res.Action.State != queue.StateApproved || *res.Action.DecidedBy != "user:bob@example.com" {
			t.Fatalf("second approval: %v %+v", err, res.Action)
		}
		// After the quorum, ann's approval is still a replay; cara's is late.
		if res, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil || !res.Replayed {
			t.Fatalf("ann after the quorum: %v, want a replay", err)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:cara@example.com"}); queue.ErrorCode(err) != queue.CodeAlreadyDecided {
			t.Fatalf("cara after the quorum: %v, want already_decided", err)
		}
		evs, err := queue.Timeline(ctx, st, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var channel string
		for _, ev := range evs {
			if ev.Kind == queue.EventApproved {
				channel = ev.Channel
			}
		}
		if channel != "slack" {
			t.Fatalf("the approved event's channel is %q, want slack", channel)
		}
	})
}

func TestRequestChanges(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, svc *queue.Service, st queue.Store) {
		ctx := t.Context()
		a := submitPending(t, svc, "post_update", "changes")
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateChangesRequested, ID: a.ID, By: "user:ann@example.com", Note: "  "}); queue.ErrorCode(err) != queue.CodeInvalidRequest {
			t.Fatalf("request changes without a note: %v, want invalid_request", err)
		}
		res, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateChangesRequested, ID: a.ID, By: "user:ann@example.com", Note: "use the formal greeting"})
		if err != nil || res.Action.State != queue.StateChangesRequested || *res.Action.DecisionNote != "use the formal greeting" || !res.Action.State.Final() {
			t.Fatalf("request changes: %v %+v", err, res.Action)
		}
		if res, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateChangesRequested, ID: a.ID, By: "user:ann@example.com", Note: "again"}); err != nil || !res.Replayed {
			t.Fatalf("same user again: %v, want a replay", err)
		}
		for _, to := range []queue.State{queue.StateApproved, queue.StateRejected, queue.StateChangesRequested} {
			if _, err := svc.Decide(ctx, queue.DecideRequest{ID: a.ID, To: to, By: "user:bob@example.com", Note: "x"}); queue.ErrorCode(err) != queue.CodeAlreadyDecided {
				t.Fatalf("another decision after changes were requested: %v, want already_decided", err)
			}
		}
		// The intent is released: the revision is attempt 2 and pending.
		next := submitPending(t, svc, "post_update", "changes")
		if next.Attempt != 2 {
			t.Fatalf("revision: attempt %d, want 2", next.Attempt)
		}
	})
}
