package queue_test

import (
	"context"
	"encoding/json"
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

// scriptedUpstream answers each call with the next of its outcomes.
type scriptedUpstream struct {
	mu       sync.Mutex
	outcomes []queue.Execution
	calls    []string // tool of each call
}

func (u *scriptedUpstream) CallUpstream(_ context.Context, a *queue.Action) queue.Execution {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, a.Spec.UpstreamTool)
	out := u.outcomes[0]
	u.outcomes = u.outcomes[1:]
	return out
}

const atLeastOnceTools = `
upstreams:
  crm: { url: "http://127.0.0.1:1/mcp" }
channels:
  ops: { webhook: "http://127.0.0.1:1/ops", secret: events-secret, events: [action.done, action.failed] }
tools:
  crm_lookup:
    upstream: crm
    upstream_tool: lookup
    class: at-least-once
  crm_pay:
    upstream: crm
    upstream_tool: pay
    class: exactly-once
`

// atLeastOnceRegistry is atLeastOnceTools with crm listing lookup and pay.
func atLeastOnceRegistry(t *testing.T) *classify.Registry {
	t.Helper()
	file, err := classify.Parse([]byte(atLeastOnceTools), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := file.Import(map[string]classify.UpstreamListing{"crm": {Tools: []classify.UpstreamTool{{Name: "lookup"}, {Name: "pay"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// An at-least-once tool executed through an upstream answers with the
// action final (docs/mcp.md, the gateway's table): done with the upstream's
// CallToolResult, failed with the tool's text for an isError answer (its
// CallToolResult kept as result), and failed with "outcome unknown: ..."
// when no answer came, since repeating the call is harmless. Each is a
// new action (nothing is held), the agent cannot complete or fail it, its
// outcome is routed like any other (action.done, action.failed), and an
// exactly-once call with the same key claims the key for itself.
func TestAtLeastOnceUpstreamCallEndsDoneOrFailed(t *testing.T) {
	t.Parallel()
	reg := atLeastOnceRegistry(t)
	found := json.RawMessage(`{"content":[{"type":"text","text":"Ann, ann@example.com"}],"isError":false}`)
	missing := json.RawMessage(`{"content":[{"type":"text","text":"no such contact"}],"isError":true}`)
	paid := json.RawMessage(`{"content":[{"type":"text","text":"paid"}],"isError":false}`)
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "sqlite"}[sqlite], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			up := &scriptedUpstream{outcomes: []queue.Execution{
				{Outcome: queue.ExecutionDone, Result: found},
				{Outcome: queue.ExecutionFailed, Result: missing, Error: "no such contact"},
				{Outcome: queue.ExecutionUnknown, Error: "no answer within 30s"},
				{Outcome: queue.ExecutionDone, Result: paid},
			}}
			e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: reg, Service: queue.Options{Upstream: up},
				Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))})
			svc := e.Service
			lookup := func() *queue.Action {
				t.Helper()
				res, err := svc.Submit(ctx, queue.SubmitRequest{Tool: "crm_lookup", Payload: json.RawMessage(`{"contact":"c-1"}`),
					IntentKey: "contact:c-1", Agent: "bot"})
				if err != nil || !res.Created || res.Replayed {
					t.Fatalf("lookup: %+v, %v; want a new action", res, err)
				}
				return res.Action
			}

			done := lookup()
			if done.State != queue.StateDone || !queue.JSONEqual(done.Result, found) || done.Error != nil ||
				done.FinishedAt == nil || done.Attempt != 1 {
				t.Fatalf("upstream answered: %s, result %s, error %v; want done with the CallToolResult", done.State, done.Result, done.Error)
			}
			failed := lookup()
			if failed.State != queue.StateFailed || failed.Error == nil || *failed.Error != "no such contact" ||
				!queue.JSONEqual(failed.Result, missing) {
				t.Fatalf("upstream answered isError: %s, result %s, error %v; want failed with its text and result", failed.State, failed.Result, failed.Error)
			}
			unknown := lookup()
			if unknown.State != queue.StateFailed || unknown.Error == nil || *unknown.Error != "outcome unknown: no answer within 30s" {
				t.Fatalf("no answer: %s, error %v; want failed, outcome unknown", unknown.State, unknown.Error)
			}
			for _, a := range []*queue.Action{done, failed, unknown} {
				evs, err := queue.Timeline(ctx, e.Store, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				var kinds []string
				for _, ev := range evs {
					kinds = append(kinds, ev.Kind)
				}
				want := []string{queue.EventSubmitted, queue.EventDelivery, queue.OutcomeEventKind(a.State)}
				if len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
					t.Errorf("%s: events %v, want %v", a.State, kinds, want)
					continue
				}
				// The start, stored with the action by the submission's own
				// statement, says what was called, as a separate record did.
				var start map[string]any
				if err := json.Unmarshal(evs[1].Data, &start); err != nil || evs[1].Channel != queue.UpstreamChannel ||
					evs[1].Actor != queue.DispatcherActor || start["attempt"] != 1.0 || start["intent_key"] != a.IntentKey ||
					start["upstream"] == nil || start["upstream_tool"] == nil {
					t.Errorf("%s: delivery_started %s by %s on %s, want the upstream, its tool, attempt 1 and key %s", a.State, evs[1].Data, evs[1].Actor, evs[1].Channel, a.IntentKey)
				}
			}

			// Only approvals finishes an upstream call: the agent's reports
			// are refused and change nothing.
			if _, err := svc.Complete(ctx, done.ID, "bot", json.RawMessage(`{"ok":true}`), "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
				t.Errorf("agent complete of the done call: %v, want invalid_transition", err)
			}
			if _, err := svc.Fail(ctx, done.ID, "bot", "no", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
				t.Errorf("agent fail of the done call: %v, want invalid_transition", err)
			}
			if a, err := e.Store.ActionGetByID(ctx, done.ID); err != nil || a.State != queue.StateDone || a.Ticket != nil {
				t.Errorf("done call after the agent's reports: %+v, %v", a, err)
			}

			// An exactly-once call with the same key is not a replay of the
			// at-least-once actions: it claims the key and calls upstream.
			res, err := svc.Submit(ctx, queue.SubmitRequest{Tool: "crm_pay", Payload: json.RawMessage(`{"contact":"c-1"}`),
				IntentKey: "contact:c-1", Agent: "bot"})
			if err != nil || !res.Created || res.Action.State != queue.StateDone || res.Action.Attempt != 1 {
				t.Fatalf("exactly-once call with the key: %+v, %v; want a new action, done, attempt 1", res.Action, err)
			}
			if len(up.calls) != 4 {
				t.Errorf("upstream calls %v, want 4", up.calls)
			}

			// The outcomes reach the channel that listens for them.
			if _, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]string{done.ID: "action.done→ops", failed.ID: "action.failed→ops",
				unknown.ID: "action.failed→ops"} {
				list, err := e.Store.NotificationList(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, n := range list {
					got = append(got, n.Type+"→"+n.Channel)
				}
				sort.Strings(got)
				if len(got) != 1 || got[0] != want {
					t.Errorf("notifications of %s: %v, want [%s]", id, got, want)
				}
			}
		})
	}
}
