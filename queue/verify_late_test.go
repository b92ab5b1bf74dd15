package queue_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// lateVerifyTools: a refund whose verifier resolves automatically.
const lateVerifyTools = `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: http://provider.invalid/refunds
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      resolve: auto
`

// sweepingAsker answers that the provider has the refund, and while it is
// asked the sweep (another process) opens the action's stale ticket: the
// check read the action without a ticket, so its proof settles the action
// through the transition that resolves a stale ticket opened meanwhile.
type sweepingAsker struct {
	mu     sync.Mutex
	store  queue.Store
	clock  *testclock.Clock
	opened []*queue.Ticket
}

func (a *sweepingAsker) Ask(ctx context.Context, _ classify.Tool, _ queue.VerifyQuestion) (json.RawMessage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	opened, err := a.store.TicketOpenStale(ctx, queue.StaleDue(a.clock.Now(), 10))
	if err != nil {
		return nil, err
	}
	a.opened = append(a.opened, opened...)
	return json.RawMessage(`{"refunds":[{"id":"re_9","line_id":"l-7"}]}`), nil
}

// A verifier's proof that settles an action resolves the stale ticket
// opened meanwhile as the verifier's finding: the verifier's note
// (VerifiedNote), actor and channel, counted as the verifier's, not as
// "late report from the agent".
func TestVerifierProofResolvesStaleTicketOpenedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			reg := apptest.ParseTools(t, lateVerifyTools, classify.Options{WebhookSecretSet: true})
			clock := testclock.Frozen()
			asker := &sweepingAsker{clock: clock}
			var mu sync.Mutex
			resolved := map[string]int{}
			e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: clock,
				Service: queue.Options{Verifier: asker, OnTicketResolved: func(by string) {
					mu.Lock()
					defer mu.Unlock()
					resolved[by]++
				}}})
			asker.store = e.Store

			a := e.Submit("issue_refund", map[string]any{"order_id": "o-late", "line_id": "l-7", "amount": 12.5})
			if a.State != queue.StateInProgress || a.Ticket != nil {
				t.Fatalf("submitted %s with ticket %v, want in_progress without one", a.State, a.Ticket)
			}
			clock.Advance(3 * time.Minute) // past claim_timeout; the sweep has not run
			check, err := e.Service.Tickets().Verify(ctx, queue.VerifyRequest{ActionID: a.ID, By: a.RequestedBy, Agent: a.RequestedBy})
			if err != nil {
				t.Fatal(err)
			}
			if len(asker.opened) != 1 || asker.opened[0].ActionID != a.ID {
				t.Fatalf("the sweep opened %+v while the verifier was asked, want the action's stale ticket", asker.opened)
			}
			tk := asker.opened[0]
			if check.Verdict != classify.VerdictDone || check.Action == nil || check.Action.State != queue.StateDone {
				t.Fatalf("check: verdict %s, action %+v", check.Verdict, check.Action)
			}
			note := queue.VerifiedNote(classify.VerifyOutcome{Verdict: check.Verdict, Reason: check.Reason})
			by := "verifier:issue_refund"
			stored, err := e.Store.TicketGetByID(ctx, tk.ID)
			if err != nil {
				t.Fatal(err)
			}
			for what, got := range map[string]*queue.Ticket{"answer": check.Action.Ticket, "stored": stored} {
				if got == nil || got.ID != tk.ID || got.State != queue.TicketResolved {
					t.Fatalf("%s: ticket %+v, want %s resolved", what, got, tk.ID)
				}
				if apptest.Deref(got.Note) != note {
					t.Errorf("%s: ticket note %q, want the verifier's %q", what, apptest.Deref(got.Note), note)
				}
				if apptest.Deref(got.ResolvedBy) != by || got.Outcome == nil || *got.Outcome != queue.StateDone {
					t.Errorf("%s: resolved by %q as %v, want %s as done", what, apptest.Deref(got.ResolvedBy), got.Outcome, by)
				}
			}
			evs, err := e.Store.EventList(ctx, queue.EventListParams{ActionID: a.ID, Kind: queue.EventTicketResolved, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Fatalf("%d ticket_resolved events, want 1", len(evs))
			}
			if evs[0].Actor != by || evs[0].Channel != queue.ChannelVerifier ||
				!queue.JSONEqual(evs[0].Data, queue.TicketEventData(tk.ID, queue.TicketStale, queue.StateDone, note, nil)) {
				t.Errorf("ticket_resolved by %s on %s, data %s; want by %s on %s with the verifier's note",
					evs[0].Actor, evs[0].Channel, evs[0].Data, by, queue.ChannelVerifier)
			}
			mu.Lock()
			defer mu.Unlock()
			if resolved[queue.ResolvedByVerifier] != 1 || len(resolved) != 1 {
				t.Errorf("tickets resolved %v, want once by the verifier", resolved)
			}
		})
	}
}
