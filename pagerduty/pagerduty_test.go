package pagerduty_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/pagerduty"
	"github.com/approvals/approvals/pagerduty/pagerdutytest"
	"github.com/approvals/approvals/queue"
)

const routingKey = "R0UTINGKEY0123456789abcdefABCDEF"

// memory keeps the recorded triggers as the stores do; the stores' own behaviour is the
// conformance suite's.
type memory struct {
	mu   sync.Mutex
	list []queue.ChannelMessage
}

func (m *memory) ChannelMessageAdd(_ context.Context, c queue.ChannelMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = append(m.list, c)
	return nil
}

func (m *memory) ChannelMessageList(_ context.Context, id string) ([]queue.ChannelMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []queue.ChannelMessage
	for _, c := range m.list {
		if c.ActionID == id {
			out = append(out, c)
		}
	}
	return out, nil
}

func (m *memory) ActionGetByID(context.Context, string) (*queue.Action, error) {
	return nil, queue.ActionNotFound("")
}

func setup(t *testing.T) (*pagerdutytest.Server, queue.Notifier, *memory) {
	t.Helper()
	pd := pagerdutytest.New(t, routingKey)
	p, err := pagerduty.New(pagerduty.Config{URL: pd.URL, PublicURL: "https://approvals.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	mem := &memory{}
	return pd, maintenance.ChannelNotifier[pagerduty.Event](classify.KindPagerDuty, p, mem, nil), mem
}

func action(state queue.State) *queue.Action {
	return &queue.Action{ID: "0190b-1", Tool: "send_customer_email", IntentKey: "email:c-1:x", State: state, RequestedBy: "agent:bot",
		Payload: json.RawMessage(`{"subject":"Hello"}`), Spec: classify.Tool{Preview: map[string]string{"title": "{subject}"}}}
}

func note(key, typ string, a *queue.Action, tk *queue.Ticket) queue.Notification {
	return queue.Notification{ID: "n-" + typ, Type: typ, Action: a, Ticket: tk, OccurredAt: time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC),
		Channel: classify.Channel{Name: "pager", PagerDuty: &classify.PagerDutyChannel{RoutingKey: key}}}
}

// An escalation triggers an incident keyed by the action id, with a link to its page; the
// decision resolves that incident. A ticket triggers one keyed by the ticket id, which its
// resolution resolves.
func TestTriggerAndResolve(t *testing.T) {
	t.Parallel()
	pd, n, mem := setup(t)
	ctx := context.Background()
	if err := n.Notify(ctx, note(routingKey, classify.EventActionEscalated, action(queue.StatePending), nil)); err != nil {
		t.Fatal(err)
	}
	tr := pd.WaitFor(t, "trigger", 1, 5*time.Second)[0]
	if tr.DedupKey != "0190b-1" || tr.Payload.Severity != "warning" || !strings.Contains(tr.Payload.Summary, "Escalated") ||
		!strings.Contains(tr.Payload.Summary, "Hello") || len(tr.Links) != 1 || tr.Links[0].Href != "https://approvals.example.com/actions/0190b-1" {
		t.Fatalf("trigger %+v", tr)
	}
	if !pd.Open("0190b-1") || len(mem.list) != 1 || mem.list[0].Ref != "0190b-1" || mem.list[0].Address != "pager" {
		t.Fatalf("open %v, recorded %+v", pd.Open("0190b-1"), mem.list)
	}
	if err := n.Notify(ctx, note(routingKey, classify.EventActionApproved, action(queue.StateApproved), nil)); err != nil {
		t.Fatal(err)
	}
	if r := pd.WaitFor(t, "resolve", 1, 5*time.Second)[0]; r.DedupKey != "0190b-1" || r.Payload != nil {
		t.Fatalf("resolve %+v", r)
	}
	if pd.Open("0190b-1") {
		t.Fatal("the incident is still open after the decision")
	}

	tk := &queue.Ticket{ID: "0190c-9", Kind: queue.TicketStale, OpenedAt: time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)}
	if err := n.Notify(ctx, note(routingKey, classify.EventTicketOpened, action(queue.StateInProgress), tk)); err != nil {
		t.Fatal(err)
	}
	if tr := pd.WaitFor(t, "trigger", 2, 5*time.Second)[1]; tr.DedupKey != "0190c-9" || tr.Payload.Severity != "error" {
		t.Fatalf("ticket trigger %+v", tr)
	}
	if err := n.Notify(ctx, note(routingKey, classify.EventTicketResolved, action(queue.StateFailed), tk)); err != nil {
		t.Fatal(err)
	}
	if r := pd.WaitFor(t, "resolve", 2, 5*time.Second)[1]; r.DedupKey != "0190c-9" || pd.Open("0190c-9") {
		t.Fatalf("ticket resolve %+v", r)
	}
}

// A decision on a channel that triggered nothing for the action sends nothing; refusals
// are errors for the outbox to retry, which never repeat the routing key.
func TestNothingToResolveAndRefusals(t *testing.T) {
	t.Parallel()
	pd, n, _ := setup(t)
	ctx := context.Background()
	if err := n.Notify(ctx, note(routingKey, classify.EventActionRejected, action(queue.StateRejected), nil)); err != nil {
		t.Fatal(err)
	}
	if got := pd.Events(); len(got) != 0 {
		t.Fatalf("a decision with nothing triggered sent %d events", len(got))
	}
	pd.FailNext(http.StatusTooManyRequests)
	if err := n.Notify(ctx, note(routingKey, classify.EventActionEscalated, action(queue.StatePending), nil)); err == nil || !strings.Contains(err.Error(), "429") {
		t.Fatalf("429: %v", err)
	}
	const wrong = "WRONGKEY0123456789abcdefABCDEF00"
	err := n.Notify(ctx, note(wrong, classify.EventActionEscalated, action(queue.StatePending), nil))
	if err == nil || !strings.Contains(err.Error(), "Invalid routing key") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("wrong routing key: %v", err)
	}
}
