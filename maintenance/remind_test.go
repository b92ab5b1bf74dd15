package maintenance_test

import (
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

const remindTools = `
groups:
  leads: [ann@example.com]
  night: [cara@example.com]
channels:
  hook: { webhook: "http://127.0.0.1:1/hook", secret: events-secret }
  pager: { webhook: "http://127.0.0.1:1/pager", secret: events-secret }
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
      notify: [hook]
      remind_after: 15m
      escalate_after: 1h
      escalate_to: [night]
      escalate_notify: [pager]
`

// Two sweeps racing at every step send one reminder per interval and one
// escalation, after which escalate_to may decide.
func TestSweepRemindsAndEscalatesOnce(t *testing.T) {
	t.Parallel()
	onBothStores(t, remindTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		a, b := e.Service, e.AddProcess()
		act := submitTopic(t, a, "send_customer_email", "remind")
		if _, err := a.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: act.ID, By: "user:cara@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("escalate_to before the escalation: %v, want forbidden", err)
		}
		sweepBoth := func() (reminded, escalated int) {
			var res [2]maintenance.SweepResult
			var errs [2]error
			sweepers := []*maintenance.Sweeper{e.Sweeper(), b.Sweeper()}
			race(2, func(i int) { res[i], errs[i] = sweepers[i].Sweep(ctx) })
			for i := range res {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				reminded += res[i].Reminded
				escalated += res[i].Escalated
			}
			return reminded, escalated
		}
		steps := []struct {
			advance             time.Duration
			reminded, escalated int
		}{
			{15*time.Minute - time.Microsecond, 0, 0},
			{time.Microsecond, 1, 0}, // 15m
			{time.Minute, 0, 0},
			{14 * time.Minute, 1, 0}, // 30m
			{15 * time.Minute, 1, 0}, // 45m
			{15 * time.Minute, 1, 1}, // 60m: both
			{15 * time.Minute, 1, 0}, // 75m: no second escalation
		}
		for i, st := range steps {
			e.Clock.Advance(st.advance)
			r, e := sweepBoth()
			if r != st.reminded || e != st.escalated {
				t.Fatalf("step %d: reminded %d, escalated %d; want %d, %d", i, r, e, st.reminded, st.escalated)
			}
		}
		if _, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		list, _ := e.Store.NotificationList(ctx, act.ID)
		count := map[string]int{}
		for _, n := range list {
			count[n.Type+"→"+n.Channel]++
		}
		if count["action.reminder→hook"] != 5 || count["action.escalated→pager"] != 1 || count["action.pending→hook"] != 1 || len(count) != 3 {
			t.Fatalf("notifications: %v", count)
		}
		res, err := a.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: act.ID, By: "user:cara@example.com"})
		if err != nil || res.Action.State != queue.StateApproved {
			t.Fatalf("escalate_to after the escalation: %v", err)
		}
	})
}
