package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// staleTicket submits an exactly-once action at t0 (claim_timeout 5m) and
// opens its stale ticket at t0+10m.
func staleTicket(t *testing.T, s Store, key string) (*queue.Action, *queue.Ticket) {
	t.Helper()
	a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", key, at(0))
	opened, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(10*time.Minute), 100))
	noErr(t, err, "open stale tickets")
	for _, tk := range opened {
		if tk.ActionID == a.ID {
			return a, tk
		}
	}
	t.Fatalf("no stale ticket opened for %s", a.ID)
	return nil, nil
}

func wantTicket(t *testing.T, a *queue.Action, id string, state queue.TicketState) {
	t.Helper()
	if a.Ticket == nil {
		t.Fatalf("action %s: no ticket, want %s (%s)", a.ID, id, state)
	}
	eq(t, a.Ticket.ID, id, "ticket of the action")
	eq(t, a.Ticket.State, state, "state of the action's ticket")
}

func resolveParams(id string, outcome queue.State, now time.Time) queue.TicketResolveParams {
	return queue.TicketResolveParams{TicketID: id, Now: now, By: "user:ops@example.com", Outcome: outcome,
		Note: "checked the payment provider"}
}

var ticketTests = []test{
	{"StaleOpenedOnceAfterClaimTimeout", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:s-1", at(0))
		got, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(5*time.Minute-time.Second), 100))
		noErr(t, err, "open before the deadline")
		eq(t, len(got), 0, "tickets before the claim timeout")
		due := queue.StaleDue(at(5*time.Minute), 100)
		got, err = s.TicketOpenStale(t.Context(), due)
		noErr(t, err, "open at the deadline")
		eq(t, len(got), 1, "tickets at the claim timeout")
		tk := got[0]
		eq(t, tk.ActionID, a.ID, "action")
		eq(t, tk.Kind, queue.TicketStale, "kind")
		eq(t, tk.State, queue.TicketOpen, "state")
		timeEq(t, tk.OpenedAt, at(5*time.Minute), "opened at")
		timePtrEq(t, tk.ResolvedAt, nil, "resolved at")
		strPtrEq(t, tk.ResolvedBy, nil, "resolved by")
		if tk.Outcome != nil {
			t.Fatalf("outcome of an open ticket: %v", *tk.Outcome)
		}
		byID, err := s.TicketGetByID(t.Context(), tk.ID)
		noErr(t, err, "get ticket")
		eq(t, byID.ActionID, a.ID, "get: action")
		eq(t, byID.Kind, queue.TicketStale, "get: kind")
		timeEq(t, byID.OpenedAt, tk.OpenedAt, "get: opened at")

		again, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(time.Hour), 100))
		noErr(t, err, "open again")
		eq(t, len(again), 0, "tickets opened again")
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count open")
		eq(t, n, 1, "open tickets")
		cur := get(t, s, a.ID)
		eq(t, cur.State, queue.StateInProgress, "a ticket releases nothing")
		wantTicket(t, cur, tk.ID, queue.TicketOpen)
		evs := events(t, s, a.ID)
		eq(t, evs[0].Kind, queue.EventTicketOpened, "ticket event")
		eq(t, evs[0].Actor, "system", "ticket event actor")
		eventAsGiven(t, evs[0], due.Event, "ticket", tk.ID, "ticket event")
		jsonEq(t, evs[0].Data, json.RawMessage(`{"ticket":"`+tk.ID+`","kind":"stale"}`), "ticket event data")
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventTicketOpened), 1, "ticket events")
	}},
	{"StaleFollowsTheExecutionDeadline", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "email:s-2", at(0))
		approve(t, s, a.ID, at(time.Minute))
		transition(t, s, executeParams(a.ID, at(2*time.Minute), at(20*time.Minute)))
		got, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(20*time.Minute-time.Second), 100))
		noErr(t, err, "open early")
		eq(t, len(got), 0, "tickets before the deadline")
		got, err = s.TicketOpenStale(t.Context(), queue.StaleDue(at(20*time.Minute), 100))
		noErr(t, err, "open at the deadline")
		eq(t, len(got), 1, "tickets at the deadline")
		// Pending, approved and finished actions never go stale.
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "email:s-3", at(0))
		b := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:s-4", at(0))
		transition(t, s, completeParams(b.ID, at(time.Minute), `{}`))
		got, err = s.TicketOpenStale(t.Context(), queue.StaleDue(at(1000*time.Hour), 100))
		noErr(t, err, "open late")
		eq(t, len(got), 0, "tickets for actions not in progress")
	}},
	{"StaleLimit", func(t *testing.T, s Store) {
		for _, k := range []string{"a", "b", "c"} {
			submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:lim:"+k, at(0))
		}
		got, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(time.Hour), 2))
		noErr(t, err, "first batch")
		eq(t, len(got), 2, "first batch")
		got, err = s.TicketOpenStale(t.Context(), queue.StaleDue(at(time.Hour), 2))
		noErr(t, err, "second batch")
		eq(t, len(got), 1, "second batch: the limit skips actions that have a ticket")
	}},
	{"StaleConcurrentSweeps", func(t *testing.T, s Store) {
		const actions, sweepers = 5, 20
		for i := range actions {
			submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:sweep:"+string(rune('a'+i)), at(0))
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		opened := make([][]*queue.Ticket, sweepers)
		errs := make([]error, sweepers)
		for i := range sweepers {
			wg.Go(func() {
				<-start
				opened[i], errs[i] = s.TicketOpenStale(t.Context(), queue.StaleDue(at(time.Hour), 100))
			})
		}
		close(start)
		wg.Wait()
		perAction := map[string]int{}
		for i := range sweepers {
			noErr(t, errs[i], "sweep")
			for _, tk := range opened[i] {
				perAction[tk.ActionID]++
			}
		}
		eq(t, len(perAction), actions, "actions with a ticket")
		for id, n := range perAction {
			eq(t, n, 1, "tickets opened for "+id)
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, actions, "open tickets")
		list, err := s.TicketList(t.Context(), queue.TicketListParams{Limit: 100})
		noErr(t, err, "list")
		eq(t, len(list), actions, "tickets stored")
	}},
	{"ResolveDone", func(t *testing.T, s Store) {
		a, tk := staleTicket(t, s, "refund:r-1")
		now := at(time.Hour)
		p := resolveParams(tk.ID, queue.StateDone, now)
		p.Result = json.RawMessage(`{"refund_id":"r-77"}`)
		res, err := s.TicketResolve(t.Context(), p)
		got, rt := res.Action, res.Ticket
		noErr(t, err, "resolve")
		for _, cur := range []*queue.Action{got, get(t, s, a.ID)} {
			eq(t, cur.State, queue.StateDone, "action state")
			jsonEq(t, cur.Result, []byte(`{"refund_id":"r-77"}`), "action result")
			timePtrEq(t, cur.FinishedAt, ptr(now), "finished at")
			wantTicket(t, cur, tk.ID, queue.TicketResolved)
		}
		stored, err := s.TicketGetByID(t.Context(), tk.ID)
		noErr(t, err, "get ticket")
		for _, r := range []*queue.Ticket{rt, stored} {
			eq(t, r.State, queue.TicketResolved, "ticket state")
			timePtrEq(t, r.ResolvedAt, ptr(now), "resolved at")
			strPtrEq(t, r.ResolvedBy, ptr("user:ops@example.com"), "resolved by")
			if r.Outcome == nil || *r.Outcome != queue.StateDone {
				t.Fatalf("outcome: got %v, want done", r.Outcome)
			}
			strPtrEq(t, r.Note, ptr("checked the payment provider"), "note")
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "open tickets")
		kinds := eventKinds(t, s, a.ID)
		eq(t, countKind(kinds, queue.EventTicketResolved), 1, "resolution events")
		evs := events(t, s, a.ID)
		eq(t, evs[0].Actor, "user:ops@example.com", "resolution event actor")

		// Resolving again answers with the ticket as it stands.
		res, err = s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, at(2*time.Hour)))
		cur, again := res.Action, res.Ticket
		isErr(t, err, queue.ErrTicketNotOpen, "resolve twice")
		if again == nil {
			t.Fatal("resolve twice: no current ticket returned")
		}
		eq(t, again.State, queue.TicketResolved, "current ticket state")
		if again.Outcome == nil || *again.Outcome != queue.StateDone {
			t.Fatalf("current ticket outcome: got %v, want done", again.Outcome)
		}
		// The service shows the operator this action with the 409.
		if cur == nil {
			t.Fatal("resolve twice: no current action returned")
		}
		eq(t, cur.State, queue.StateDone, "action after resolving twice")
		eq(t, get(t, s, a.ID).State, queue.StateDone, "stored action after resolving twice")
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventTicketResolved), 1, "resolution events after resolving twice")
	}},
	{"ResolveWritesThePlan", func(t *testing.T, s Store) {
		// Both stores write what queue.PlanTicketResolution computes: an
		// outcome other than done or failed is refused and changes nothing;
		// the outcome event comes before ticket_resolved, both on the
		// finding's channel (the dashboard when none is named); the move is
		// announced as any change of state.
		sub := s.Subscribe()
		defer sub.Cancel()
		a, tk := staleTicket(t, s, "refund:plan-1")
		bad := resolveParams(tk.ID, queue.StateApproved, at(time.Hour))
		if _, err := s.TicketResolve(t.Context(), bad); err == nil {
			t.Fatal("resolved a ticket with the outcome approved")
		}
		eq(t, get(t, s, a.ID).State, queue.StateInProgress, "action after a refused outcome")
		stored, err := s.TicketGetByID(t.Context(), tk.ID)
		noErr(t, err, "get ticket")
		eq(t, stored.State, queue.TicketOpen, "ticket after a refused outcome")

		p := resolveParams(tk.ID, queue.StateDone, at(time.Hour))
		p.Channel = "verifier"
		_, err = s.TicketResolve(t.Context(), p)
		noErr(t, err, "resolve on a named channel")
		waitChange(t, sub.Changes, a.ID, queue.StateDone)
		evs := events(t, s, a.ID) // newest first
		eq(t, evs[0].Kind, queue.EventTicketResolved, "last event")
		eq(t, evs[1].Kind, queue.EventCompleted, "the outcome event before it")
		for _, ev := range evs[:2] {
			eq(t, ev.Channel, "verifier", ev.Kind+" channel")
			eq(t, ev.Actor, "user:ops@example.com", ev.Kind+" actor")
		}

		b, tk2 := staleTicket(t, s, "refund:plan-2")
		_, err = s.TicketResolve(t.Context(), resolveParams(tk2.ID, queue.StateFailed, at(time.Hour)))
		noErr(t, err, "resolve on the dashboard")
		waitChange(t, sub.Changes, b.ID, queue.StateFailed)
		evs = events(t, s, b.ID)
		eq(t, evs[0].Kind, queue.EventTicketResolved, "last event")
		eq(t, evs[1].Kind, queue.EventFailed, "the outcome event before it")
		for _, ev := range evs[:2] {
			eq(t, ev.Channel, queue.ChannelDashboard, ev.Kind+" channel")
		}
	}},
	{"ResolveAfterActionFinished", func(t *testing.T, s Store) {
		// A late report can finish the action without seeing a ticket the
		// sweep opened at the same moment; the operator can still close it,
		// recording the finding and changing no state.
		a, tk := staleTicket(t, s, "refund:race-1")
		transition(t, s, completeParams(a.ID, at(time.Hour), `{"refund_id":"r-9"}`))
		res, err := s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateDone, at(2*time.Hour)))
		got, resolved := res.Action, res.Ticket
		noErr(t, err, "resolve a stale ticket of a finished action")
		eq(t, resolved.State, queue.TicketResolved, "ticket state")
		eq(t, got.State, queue.StateDone, "action state unchanged")
		if !queue.JSONEqual(got.Result, []byte(`{"refund_id":"r-9"}`)) {
			t.Fatalf("result changed: %s", got.Result)
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "open tickets")
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventTicketResolved), 1, "the finding in the timeline")
	}},
	{"ResolveFailedReleases", func(t *testing.T, s Store) {
		a, tk := staleTicket(t, s, "refund:r-2")
		res, err := s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, at(time.Hour)))
		got := res.Action
		noErr(t, err, "resolve")
		eq(t, got.State, queue.StateFailed, "action state")
		timePtrEq(t, got.FinishedAt, ptr(at(time.Hour)), "finished at")
		strPtrEq(t, got.Error, ptr(queue.OperatorError("checked the payment provider")), "error of an operator's failed")
		next := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:r-2", at(2*time.Hour))
		eq(t, next.Attempt, 2, "next attempt")
		eq(t, a.Attempt, 1, "first attempt")
	}},
	{"Conflict", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:c-1", at(0))
		transition(t, s, completeParams(a.ID, at(time.Minute), `{"refund_id":"r-1"}`))
		report := func(now time.Time) queue.Event {
			return queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: now, Data: json.RawMessage(`{"reported":"failed"}`)}
		}
		tk, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(time.Hour), Event: report(at(time.Hour))})
		noErr(t, err, "open conflict")
		eq(t, tk.Kind, queue.TicketConflict, "kind")
		eq(t, tk.State, queue.TicketOpen, "state")
		eq(t, tk.ActionID, a.ID, "action")
		timeEq(t, tk.OpenedAt, at(time.Hour), "opened at")
		same, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(2 * time.Hour), Event: report(at(2 * time.Hour))})
		noErr(t, err, "open conflict again")
		eq(t, same.ID, tk.ID, "one open conflict ticket")
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 1, "open tickets")
		kinds := eventKinds(t, s, a.ID)
		eq(t, countKind(kinds, queue.EventOutcomeConflict), 2, "both reports kept")
		cur := get(t, s, a.ID)
		eq(t, cur.State, queue.StateDone, "a conflict changes no state")
		wantTicket(t, cur, tk.ID, queue.TicketOpen)

		res, err := s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, at(3*time.Hour)))
		got, rt := res.Action, res.Ticket
		noErr(t, err, "resolve conflict")
		eq(t, got.State, queue.StateDone, "state after resolving a conflict")
		jsonEq(t, got.Result, []byte(`{"refund_id":"r-1"}`), "result after resolving a conflict")
		eq(t, rt.State, queue.TicketResolved, "ticket state")
		if rt.Outcome == nil || *rt.Outcome != queue.StateFailed {
			t.Fatalf("finding: got %v, want failed", rt.Outcome)
		}
		_, err = s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateDone, at(4*time.Hour)))
		isErr(t, err, queue.ErrTicketNotOpen, "resolve conflict twice")

		// After resolution a new contradiction opens a new ticket.
		next, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(5 * time.Hour), Event: report(at(5 * time.Hour))})
		noErr(t, err, "open a second conflict")
		if next.ID == tk.ID {
			t.Fatal("a resolved conflict ticket was reused")
		}
	}},
	{"ConflictHoldsIntent", func(t *testing.T, s Store) {
		// An operator resolved a stale claim failed, which released the
		// intent; the agent's late complete then opened a conflict ticket
		// (the Service's outcomeConflict): the effect may have happened.
		const key = "refund:held-1"
		a, stale := staleTicket(t, s, key)
		_, err := s.TicketResolve(t.Context(), resolveParams(stale.ID, queue.StateFailed, at(time.Hour)))
		noErr(t, err, "resolve the stale claim failed")
		ct, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(2 * time.Hour),
			Event: queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: at(2 * time.Hour), Data: json.RawMessage(`{"report":"complete"}`)}})
		noErr(t, err, "open the conflict")
		g := grantAction(t, s, "grant:held-1", at(2*time.Hour), func(g *queue.Grant) { g.MaxUses = 2 })

		count := func(what string, want int) {
			t.Helper()
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 100})
			noErr(t, err, "list the intent's actions")
			eq(t, len(list), want, what)
		}
		refused := func(res queue.ActionSubmitResult, err error, what string) {
			t.Helper()
			noErr(t, err, what)
			eq(t, res.UnderReview, true, what+": under review")
			eq(t, res.Created, false, what+": created")
			eq(t, res.Holder.ID, a.ID, what+": the latest attempt")
			eq(t, res.Holder.State, queue.StateFailed, what+": its state")
			wantTicket(t, res.Holder, ct.ID, queue.TicketOpen)
			eq(t, res.Holder.Ticket.Kind, queue.TicketConflict, what+": ticket kind")
		}
		// A new claim, twice (the second after the PostgreSQL store's
		// holder hint has been dropped), and a pending submission a grant
		// with uses left would approve: none is stored, the grant unused.
		for i := range 2 {
			b := newAction(classify.ExactlyOnce, "issue_refund", key, at(3*time.Hour))
			res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: b, Event: submittedEvent(b)})
			refused(res, err, fmt.Sprintf("claim %d", i+1))
		}
		p := newAction(classify.AtMostOnce, "send_customer_email", key, at(3*time.Hour))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: p, Event: submittedEvent(p),
			Grant: &queue.GrantTry{Now: at(3 * time.Hour), ExpiresAt: at(4 * time.Hour)}})
		refused(res, err, "pending with a grant")
		stored, err := s.GrantGetByID(t.Context(), g.ID)
		noErr(t, err, "get grant")
		eq(t, stored.Uses, 0, "grant uses")
		// Concurrent submissions, which the PostgreSQL store merges into
		// one statement, are refused the same.
		var wg sync.WaitGroup
		results, errs := make([]queue.ActionSubmitResult, 8), make([]error, 8)
		for i := range results {
			wg.Go(func() {
				c := newAction(classify.ExactlyOnce, "issue_refund", key, at(3*time.Hour))
				results[i], errs[i] = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: c, Event: submittedEvent(c)})
			})
		}
		wg.Wait()
		for i := range results {
			refused(results[i], errs[i], fmt.Sprintf("concurrent claim %d", i))
		}
		_, err = s.ActionGetByID(t.Context(), p.ID)
		isErr(t, err, queue.ErrNotFound, "the refused submission")
		count("actions of the intent under review", 1)

		// An at-least-once action holds nothing and is not held back.
		rec := submitNew(t, s, classify.AtLeastOnce, "log_event", key, at(3*time.Hour))
		eq(t, rec.State, queue.StateRecorded, "at-least-once state")
		count("after an at-least-once record", 2)

		// Once an operator resolves the conflict, a new attempt is claimed.
		_, err = s.TicketResolve(t.Context(), resolveParams(ct.ID, queue.StateDone, at(4*time.Hour)))
		noErr(t, err, "resolve the conflict")
		next := submitNew(t, s, classify.ExactlyOnce, "issue_refund", key, at(5*time.Hour))
		eq(t, next.Attempt, 2, "the next attempt")
		count("after the resolution", 3)
	}},
	{"ConflictOnHolderReplays", func(t *testing.T, s Store) {
		// A conflict on a done action, which holds its intent: a new
		// submission is the holder's replay, as always, with its ticket.
		const key = "refund:held-2"
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", key, at(0))
		transition(t, s, completeParams(a.ID, at(time.Minute), `{"refund_id":"r-2"}`))
		ct, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(time.Hour),
			Event: queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: at(time.Hour), Data: json.RawMessage(`{"report":"fail"}`)}})
		noErr(t, err, "open the conflict")
		b := newAction(classify.ExactlyOnce, "issue_refund", key, at(2*time.Hour))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: b, Event: submittedEvent(b)})
		noErr(t, err, "submit again")
		eq(t, res.UnderReview, false, "under review")
		eq(t, res.Created, false, "created")
		eq(t, res.Holder.ID, a.ID, "holder")
		wantTicket(t, res.Holder, ct.ID, queue.TicketOpen)
	}},
	{"ConflictUnknownAction", func(t *testing.T, s Store) {
		_, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: queue.NewID(at(0)), Now: at(0),
			Event: queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: at(0)}})
		isErr(t, err, queue.ErrNotFound, "conflict on an unknown action")
	}},
	{"LateReportResolvesStale", func(t *testing.T, s Store) {
		for _, c := range []struct {
			name   string
			params func(id string, now time.Time) queue.ActionTransitionParams
			state  queue.State
		}{
			{"complete", func(id string, now time.Time) queue.ActionTransitionParams {
				return completeParams(id, now, `{"refund_id":"late"}`)
			}, queue.StateDone},
			{"fail", func(id string, now time.Time) queue.ActionTransitionParams {
				return failParams(id, now, "declined after all")
			}, queue.StateFailed},
		} {
			a, tk := staleTicket(t, s, "refund:late:"+c.name)
			now := at(time.Hour)
			p := c.params(a.ID, now)
			p.Event.Channel = "mcp"
			// A note of the test's own, not LateReportNote: the store
			// writes the resolution the domain gave it.
			note := "settled by the test's " + c.name
			p.ResolveStale = queue.LateResolution(p.Event, c.state, note)
			got := transition(t, s, p)
			eq(t, got.State, c.state, c.name+": state")
			wantTicket(t, got, tk.ID, queue.TicketResolved)
			stored, err := s.TicketGetByID(t.Context(), tk.ID)
			noErr(t, err, "get ticket")
			for what, tick := range map[string]*queue.Ticket{"answer": got.Ticket, "stored": stored} {
				what = c.name + ", " + what
				eq(t, tick.State, queue.TicketResolved, what+": ticket state")
				strPtrEq(t, tick.ResolvedBy, ptr(agent), what+": resolved by")
				timePtrEq(t, tick.ResolvedAt, ptr(now), what+": resolved at")
				if tick.Outcome == nil || *tick.Outcome != c.state {
					t.Fatalf("%s: outcome %v, want %s", what, tick.Outcome, c.state)
				}
				strPtrEq(t, tick.Note, ptr(note), what+": note")
			}
			// The timeline shows who resolved it and why, after the report.
			evs, err := s.EventList(t.Context(), queue.EventListParams{ActionID: a.ID, Kind: queue.EventTicketResolved, Limit: 10})
			noErr(t, err, "list events")
			eq(t, len(evs), 1, c.name+": ticket_resolved events")
			eq(t, evs[0].Actor, agent, c.name+": resolved by, in the timeline")
			eq(t, evs[0].Channel, "mcp", c.name+": the report's channel, in the timeline")
			if !evs[0].At.Equal(now) {
				t.Fatalf("%s: ticket_resolved at %s, want %s", c.name, evs[0].At, now)
			}
			if !queue.JSONEqual(evs[0].Data, queue.TicketEventData(tk.ID, queue.TicketStale, c.state, note, nil)) {
				t.Fatalf("%s: ticket_resolved data %s", c.name, evs[0].Data)
			}
			outcome, err := s.EventList(t.Context(), queue.EventListParams{ActionID: a.ID, Kind: p.Event.Kind, Limit: 10})
			noErr(t, err, "list outcome events")
			eq(t, len(outcome), 1, c.name+": "+p.Event.Kind+" events")
			if outcome[0].ID >= evs[0].ID {
				t.Fatalf("%s: the %s event (id %d) does not precede ticket_resolved (id %d)", c.name, p.Event.Kind, outcome[0].ID, evs[0].ID)
			}
			_, err = s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateDone, at(2*time.Hour)))
			isErr(t, err, queue.ErrTicketNotOpen, c.name+": operator after the agent")
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "open tickets")

		// Without an open ticket the resolution changes nothing.
		b := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:late:none", at(0))
		p := completeParams(b.ID, at(time.Minute), `{}`)
		p.ResolveStale = queue.LateResolution(p.Event, p.To, queue.LateReportNote)
		got := transition(t, s, p)
		if got.Ticket != nil {
			t.Fatalf("ticket appeared: %+v", got.Ticket)
		}
	}},
	{"TicketOnAction", func(t *testing.T, s Store) {
		// An open ticket wins over a more recent resolved one.
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:pick", at(0))
		conflict, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(time.Minute),
			Event: queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: at(time.Minute)}})
		noErr(t, err, "open conflict")
		stale, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(10*time.Minute), 10))
		noErr(t, err, "open stale")
		eq(t, len(stale), 1, "stale tickets")
		_, err = s.TicketResolve(t.Context(), resolveParams(stale[0].ID, queue.StateDone, at(20*time.Minute)))
		noErr(t, err, "resolve stale")
		wantTicket(t, get(t, s, a.ID), conflict.ID, queue.TicketOpen)
		// With none open, the most recent one.
		_, err = s.TicketResolve(t.Context(), resolveParams(conflict.ID, queue.StateDone, at(30*time.Minute)))
		noErr(t, err, "resolve conflict")
		wantTicket(t, get(t, s, a.ID), stale[0].ID, queue.TicketResolved)
	}},
	{"ListAndGet", func(t *testing.T, s Store) {
		a, first := staleTicket(t, s, "refund:list:1")
		b := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:list:2", at(time.Hour))
		second, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(2*time.Hour), 10))
		noErr(t, err, "open second")
		eq(t, len(second), 1, "second stale ticket")
		third, err := s.TicketOpenConflict(t.Context(), queue.TicketOpenConflictParams{ActionID: a.ID, Now: at(3 * time.Hour),
			Event: queue.Event{Kind: queue.EventOutcomeConflict, Actor: agent, At: at(3 * time.Hour)}})
		noErr(t, err, "open conflict")
		_, err = s.TicketResolve(t.Context(), resolveParams(first.ID, queue.StateDone, at(4*time.Hour)))
		noErr(t, err, "resolve first")

		ticketIDs := func(p queue.TicketListParams) []string {
			t.Helper()
			if p.Limit == 0 {
				p.Limit = 100
			}
			list, err := s.TicketList(t.Context(), p)
			noErr(t, err, "list tickets")
			out := make([]string, len(list))
			for i, tk := range list {
				out[i] = tk.ID
			}
			return out
		}
		sliceEq(t, ticketIDs(queue.TicketListParams{}), []string{first.ID, second[0].ID, third.ID}, "all, oldest first")
		sliceEq(t, ticketIDs(queue.TicketListParams{State: queue.TicketOpen}), []string{second[0].ID, third.ID}, "open")
		sliceEq(t, ticketIDs(queue.TicketListParams{State: queue.TicketResolved}), []string{first.ID}, "resolved")
		sliceEq(t, ticketIDs(queue.TicketListParams{ActionID: a.ID}), []string{first.ID, third.ID}, "of one action")
		sliceEq(t, ticketIDs(queue.TicketListParams{ActionID: b.ID, State: queue.TicketOpen}), []string{second[0].ID}, "combined")
		sliceEq(t, ticketIDs(queue.TicketListParams{Limit: 2}), []string{first.ID, second[0].ID}, "limit")
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 2, "open tickets")

		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			_, err := s.TicketGetByID(t.Context(), id)
			isErr(t, err, queue.ErrNotFound, "get ticket "+id)
			_, err = s.TicketResolve(t.Context(), resolveParams(id, queue.StateDone, at(0)))
			isErr(t, err, queue.ErrNotFound, "resolve ticket "+id)
		}
	}},
}
