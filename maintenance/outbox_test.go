package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

const outboxTools = `
groups:
  leads: [ann@example.com, bob@example.com]
channels:
  leads-hook: { webhook: "http://127.0.0.1:1/leads", secret: events-secret }
  leads-slack: { slack: { channel: C0APPROVALS } }
  ops: { webhook: "http://127.0.0.1:1/ops", secret: events-secret, events: [action.failed, ticket.opened] }
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
      notify: [leads-hook, leads-slack]
  post_update:
    class: at-most-once
    intent: "post:{topic}"
  issue_refund:
    class: exactly-once
    intent: "refund:{topic}"
    claim_timeout: 1m
`

// recorder stands in for a channel's receiver: it records each delivery
// and answers what fail says for the attempt.
type recorder struct {
	mu    sync.Mutex
	calls []queue.Notification
	fail  func(n queue.Notification) error
}

func (r *recorder) Notify(_ context.Context, n queue.Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, n)
	if r.fail != nil {
		return r.fail(n)
	}
	return nil
}

func (r *recorder) byID() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.calls {
		out[c.ID]++
	}
	return out
}

// onBothStores runs fn on SQLite and on PostgreSQL with the outbox tools
// and a clock that stands still at a known date until the test moves it.
func onBothStores(t *testing.T, tools string, fn func(t *testing.T, e *apptest.Env)) {
	t.Helper()
	reg := apptest.ParseTools(t, tools, classify.Options{WebhookSecretSet: true, SlackConfigured: true})
	clock := testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))
	apptest.OnBothStores(t, apptest.EnvOptions{Tools: reg, Clock: clock}, fn)
}

// notifiers is the notifiers of a sender by channel kind.
func notifiers(webhook, slack queue.Notifier) map[string]queue.Notifier {
	return map[string]queue.Notifier{"webhook": webhook, "slack": slack}
}

func submitTopic(t *testing.T, svc *queue.Service, tool, topic string) *queue.Action {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"customer_id": "c-1", "topic": topic})
	res, err := svc.Submit(t.Context(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.Action
}

func TestFanOutRoutesEvents(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		svc, st, outbox := e.Service, e.Store, e.Outbox(maintenance.OutboxConfig{})
		a := submitTopic(t, svc, "send_customer_email", "route")
		submitTopic(t, svc, "send_customer_email", "route") // a replay notifies nobody
		other := submitTopic(t, svc, "post_update", "route")
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateRejected, ID: other.ID, By: "user:ann@example.com", Note: "no"}); err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.FanOut(ctx, 2); err != nil { // a small batch: FanOut loops
			t.Fatal(err)
		}
		if n, err := outbox.FanOut(ctx, 2); err != nil || n != 0 {
			t.Fatalf("a second fan-out took %d events (%v), want none", n, err)
		}
		list, err := st.NotificationList(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range list {
			got = append(got, n.Type+"→"+n.Channel+"/"+n.Kind+"/"+string(n.State))
		}
		want := []string{"action.pending→leads-hook/webhook/pending", "action.pending→leads-slack/slack/pending",
			"action.approved→leads-hook/webhook/pending", "action.approved→leads-slack/slack/pending"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("notifications of the routed action:\n got %v\nwant %v", got, want)
		}
		if list, _ := st.NotificationList(ctx, other.ID); len(list) != 0 {
			t.Fatalf("a tool without notify got %d notifications", len(list))
		}
		if depth, err := st.NotificationCountPending(ctx); err != nil || depth != 4 {
			t.Fatalf("queue depth %d (%v), want 4", depth, err)
		}
	})
}

// A notification committed with its transition is delivered after a
// restart, although the first sender died after claiming it.
func TestOutboxSurvivesASenderThatDied(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		first := e.Store
		a := submitTopic(t, e.Service, "send_customer_email", "crash")
		if _, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		// The first process claims both notifications and dies before sending.
		claimed, err := first.NotificationClaim(ctx, queue.NotificationClaimParams{Now: e.Clock.Now(), Lease: time.Minute, Limit: 100})
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claim: %d (%v), want 2", len(claimed), err)
		}
		hook, slack := &recorder{}, &recorder{}
		restarted := e.AddProcess()
		sender := restarted.Outbox(maintenance.OutboxConfig{Notifiers: notifiers(hook, slack), Lease: time.Minute})
		if n, err := sender.SendDue(ctx); err != nil || n != 0 {
			t.Fatalf("within the lease the restarted sender took %d (%v), want none", n, err)
		}
		e.Clock.Advance(time.Minute)
		if n, err := sender.SendDue(ctx); err != nil || n != 2 {
			t.Fatalf("after the lease the restarted sender took %d (%v), want 2", n, err)
		}
		for _, r := range []*recorder{hook, slack} {
			if len(r.calls) != 1 || r.calls[0].Action.ID != a.ID || r.calls[0].Type != classify.EventActionPending || r.calls[0].Attempt != 2 {
				t.Fatalf("deliveries: %+v", r.calls)
			}
		}
		if hook.calls[0].ID != claimed[0].ID && hook.calls[0].ID != claimed[1].ID {
			t.Fatal("the notification id changed across the retry")
		}
		// The dead sender's late settlement changes nothing.
		if ok, err := first.NotificationSettle(ctx, queue.NotificationSettleParams{ID: claimed[0].ID, Attempts: 1,
			State: queue.NotificationPending, Now: e.Clock.Now(), DueAt: e.Clock.Now(), LastError: "late"}); err != nil || ok {
			t.Fatalf("a stale settlement applied (%v, %v)", ok, err)
		}
		list, _ := restarted.Store.NotificationList(ctx, a.ID)
		for _, n := range list {
			if n.State != queue.NotificationDelivered || n.DeliveredAt == nil {
				t.Fatalf("notification %s is %s", n.ID, n.State)
			}
		}
	})
}

// Two healthy senders on one database deliver each notification once.
func TestOutboxTwoSendersDeliverOnce(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		st := e.Store
		for i := range 25 {
			submitTopic(t, e.Service, "send_customer_email", fmt.Sprintf("pair-%d", i))
		}
		hook := &recorder{}
		cfg := maintenance.OutboxConfig{Notifiers: notifiers(hook, hook), Batch: 7}
		senders := []*maintenance.Outbox{e.Outbox(cfg), e.AddProcess().Outbox(cfg)}
		var errs [2]error
		race(2, func(i int) {
			// Both fan out and send until nothing is left.
			for {
				f, err := senders[i].FanOut(ctx, 5)
				if err != nil {
					errs[i] = err
					return
				}
				n, err := senders[i].SendDue(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				if f == 0 && n == 0 {
					if d, _ := st.NotificationCountPending(ctx); d == 0 {
						return
					}
				}
			}
		})
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatal(err)
		}
		got := hook.byID()
		if len(got) != 50 {
			t.Fatalf("%d notifications delivered, want 50", len(got))
		}
		for id, n := range got {
			if n != 1 {
				t.Fatalf("notification %s delivered %d times", id, n)
			}
		}
	})
}

func race(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

func TestOutboxRetriesWithBackoffThenGivesUp(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		var mu sync.Mutex
		outcomes := map[string]int{}
		svc, st := e.Service, e.Store
		a := submitTopic(t, svc, "send_customer_email", "retry")
		hook := &recorder{fail: func(n queue.Notification) error {
			if n.Attempt == 3 {
				return &queue.RetryAfterError{After: 90 * time.Second, Err: errors.New("429")}
			}
			return errors.New("receiver answered 500")
		}}
		slack := &recorder{}
		outbox := e.Outbox(maintenance.OutboxConfig{Notifiers: notifiers(hook, slack), OnNotification: func(kind, outcome string) {
			mu.Lock()
			outcomes[kind+"/"+outcome]++
			mu.Unlock()
		}})
		if _, err := outbox.FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		start := e.Clock.Now()
		hookState := func() queue.NotificationRecord {
			list, err := st.NotificationList(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range list {
				if n.Channel == "leads-hook" {
					return n
				}
			}
			t.Fatal("no leads-hook notification")
			return queue.NotificationRecord{}
		}
		// 5s, 10s, then the receiver's 90s, then 40s, 80s, … capped at 5m.
		for i, wait := range []time.Duration{5 * time.Second, 10 * time.Second, 90 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute} {
			if _, err := outbox.SendDue(ctx); err != nil {
				t.Fatal(err)
			}
			n := hookState()
			if n.State != queue.NotificationPending || n.Attempts != i+1 || !n.DueAt.Equal(e.Clock.Now().Add(wait)) || n.LastError == "" {
				t.Fatalf("after attempt %d: %s, %d attempts, due in %s (want %s), error %q", i+1, n.State, n.Attempts, n.DueAt.Sub(e.Clock.Now()), wait, n.LastError)
			}
			e.Clock.Advance(wait - time.Microsecond)
			if k, _ := outbox.SendDue(ctx); k != 0 {
				t.Fatalf("attempt %d: a retry went out %s early", i+1, time.Microsecond)
			}
			e.Clock.Advance(time.Microsecond)
		}
		// Keep failing until 24 hours after creation: the last retry is due
		// exactly then, and its failure gives up.
		for hookState().State == queue.NotificationPending {
			if _, err := outbox.SendDue(ctx); err != nil {
				t.Fatal(err)
			}
			if n := hookState(); n.State == queue.NotificationPending {
				if n.DueAt.After(start.Add(24 * time.Hour)) {
					t.Fatalf("a retry is due %s, after the 24 hours", n.DueAt)
				}
				e.Clock.Advance(n.DueAt.Sub(e.Clock.Now()))
			}
		}
		n := hookState()
		if n.State != queue.NotificationFailed || e.Clock.Now().Before(start.Add(24*time.Hour)) {
			t.Fatalf("gave up at %s (state %s), want failed at 24h", e.Clock.Now().Sub(start), n.State)
		}
		if len(slack.calls) != 1 {
			t.Fatalf("the healthy channel got %d deliveries, want 1", len(slack.calls))
		}
		mu.Lock()
		defer mu.Unlock()
		if outcomes["webhook/failed"] != 1 || outcomes["slack/delivered"] != 1 || outcomes["webhook/retry"] != n.Attempts-1 {
			t.Fatalf("outcomes %v (attempts %d)", outcomes, n.Attempts)
		}
		if d, _ := st.NotificationCountPending(ctx); d != 0 {
			t.Fatalf("queue depth %d after giving up, want 0", d)
		}
	})
}

// An operator who resolves a stale ticket moves its action to an outcome:
// channels that listen for it hear of it once, as of an agent's late
// report (which writes its own failed event and resolves the ticket too).
func TestFanOutTellsOperatorOutcomes(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		svc, st := e.Service, e.Store
		byOperator := submitTopic(t, svc, "issue_refund", "operator")
		byAgent := submitTopic(t, svc, "issue_refund", "agent")
		e.Clock.Advance(2 * time.Minute)
		if _, err := e.Sweeper().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		stale, err := st.ActionGetByID(ctx, byOperator.ID)
		if err != nil || stale.Ticket == nil {
			t.Fatalf("no stale ticket: %v", err)
		}
		if _, _, err := svc.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: stale.Ticket.ID, By: "user:ops@example.com",
			Outcome: queue.StateFailed, Note: "no refund in the provider"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Fail(ctx, byAgent.ID, "bot", "declined by the provider", "api"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{byOperator.ID, byAgent.ID} {
			list, err := st.NotificationList(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range list {
				got = append(got, n.Type+"→"+n.Channel)
			}
			sort.Strings(got)
			if want := []string{"action.failed→ops", "ticket.opened→ops"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("notifications of %s: got %v, want %v", id, got, want)
			}
		}
	})
}

// TestUnroutedEventsSkipTheFanOut: an event no channel hears of (a tool
// without notify, an exactly-once claim, an outcome no channel subscribed
// to) is written as already fanned out, so the fan-out never reads it; the
// events that route somewhere still reach their channels.
func TestUnroutedEventsSkipTheFanOut(t *testing.T) {
	t.Parallel()
	onBothStores(t, outboxTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		svc, st := e.Service, e.Store
		submitTopic(t, svc, "post_update", "quiet")      // pending, but no notify
		done := submitTopic(t, svc, "issue_refund", "a") // a claim notifies nobody
		failed := submitTopic(t, svc, "issue_refund", "b")
		if _, err := svc.Complete(ctx, done.ID, "bot", json.RawMessage(`{"ok":true}`), "api"); err != nil {
			t.Fatal(err) // action.done: no channel subscribed
		}
		if _, err := svc.Fail(ctx, failed.ID, "bot", "declined", "api"); err != nil {
			t.Fatal(err) // action.failed: ops subscribed
		}
		routed := submitTopic(t, svc, "send_customer_email", "loud") // notify: leads
		n, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("the fan-out read %d events, want 2 (the failure and the routed submission)", n)
		}
		for id, want := range map[string]int{done.ID: 0, failed.ID: 1, routed.ID: 2} {
			if list, err := st.NotificationList(ctx, id); err != nil || len(list) != want {
				t.Errorf("action %s has %d notifications (%v), want %d", id, len(list), err, want)
			}
		}
	})
}

const followUpTools = `
groups:
  leads: [ann@example.com]
channels:
  leads-slack: { slack: { channel: C0LEADS } }
  night-slack: { slack: { channel: C0NIGHT } }
  other-slack: { slack: { channel: C0OTHER } }
  pager: { pagerduty: { routing_key: "pd-routing-key" }, events: [ticket.opened] }
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
      notify: [leads-slack]
      escalate_after: 1h
      escalate_notify: [night-slack]
  issue_refund:
    class: exactly-once
    intent: "refund:{topic}"
    claim_timeout: 1m
`

// A decision reaches every channel that sent a message for the action it
// recorded, whichever list named the channel (here escalate_notify, which
// hears no decisions by itself), so that no message keeps its buttons; a
// ticket's resolution reaches the channels that told of that ticket (a
// PagerDuty incident), and no other.
func TestFanOutFollowsUpOnWhatWasSent(t *testing.T) {
	t.Parallel()
	onBothStores(t, followUpTools, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		svc, st := e.Service, e.Store
		routed := func(id string) []string {
			t.Helper()
			list, err := st.NotificationList(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range list {
				got = append(got, n.Type+"→"+n.Channel)
			}
			sort.Strings(got)
			return got
		}
		a := submitTopic(t, svc, "send_customer_email", "escalated")
		told := queue.ChannelMessage{ActionID: a.ID, Kind: classify.KindSlack, Address: "C0NIGHT", Ref: "1.1", SentAt: e.Clock.Now()}
		if err := st.ChannelMessageAdd(ctx, told); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		outbox := e.Outbox(maintenance.OutboxConfig{})
		if _, err := outbox.FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		want := []string{"action.approved→leads-slack", "action.approved→night-slack", "action.pending→leads-slack"}
		if got := routed(a.ID); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("notifications of the escalated action: got %v, want %v", got, want)
		}

		refund := submitTopic(t, svc, "issue_refund", "stale")
		e.Clock.Advance(2 * time.Minute)
		if _, err := e.Sweeper().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		stale, err := st.ActionGetByID(ctx, refund.ID)
		if err != nil || stale.Ticket == nil {
			t.Fatalf("no stale ticket: %v", err)
		}
		for _, m := range []queue.ChannelMessage{
			{ActionID: refund.ID, Kind: classify.KindPagerDuty, Address: "pager", Ref: stale.Ticket.ID, SentAt: e.Clock.Now()},
			{ActionID: refund.ID, Kind: classify.KindSlack, Address: "C0OTHER", Ref: "2.2", SentAt: e.Clock.Now()},
		} {
			if err := st.ChannelMessageAdd(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := svc.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: stale.Ticket.ID, By: "user:ops@example.com",
			Outcome: queue.StateFailed, Note: "no refund in the provider"}); err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		want = []string{"ticket.opened→pager", "ticket.resolved→pager"}
		if got := routed(refund.ID); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("notifications of the ticket's action: got %v, want %v", got, want)
		}
	})
}

// The outbox does not wait for its poll: a new action that a channel hears
// of wakes it (queue.Options.OnEvents), and so does a state change made
// through the store (a decision). With the poll an hour away, only the
// wake-ups can deliver within the test's deadline.
func TestOutboxWakesWithoutItsPoll(t *testing.T) {
	t.Parallel()
	reg := apptest.ParseTools(t, outboxTools, classify.Options{WebhookSecretSet: true, SlackConfigured: true})
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "sqlite"}[sqlite], func(t *testing.T) {
			t.Parallel()
			wake := make(chan struct{}, 1)
			e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: reg, Service: queue.Options{OnEvents: func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			}}})
			hook, slack := &recorder{}, &recorder{}
			outbox := e.Outbox(maintenance.OutboxConfig{Notifiers: notifiers(hook, slack), Poll: time.Hour, Wake: wake})
			delivered := func(actionID, typ string) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					hook.mu.Lock()
					found := false
					for _, c := range hook.calls {
						found = found || c.Action != nil && c.Action.ID == actionID && c.Type == typ
					}
					hook.mu.Unlock()
					if found {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s of %s not delivered within 10s (the poll is an hour away)", typ, actionID)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			// Before Run: its first round delivers this one, and then it waits.
			first := submitTopic(t, e.Service, "send_customer_email", "first")
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); outbox.Run(ctx) }()
			t.Cleanup(func() { stop(); <-done })
			delivered(first.ID, "action.pending")

			a := submitTopic(t, e.Service, "send_customer_email", "woken")
			delivered(a.ID, "action.pending")
			// Let a round that a wake-up still owes run out (MinGap is 20ms),
			// so that only the decision's change can wake the next one.
			time.Sleep(100 * time.Millisecond)
			select {
			case <-wake:
			default:
			}
			if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			delivered(a.ID, "action.approved")
		})
	}
}
