package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// eventAsGiven checks that got is the event want as the domain built it:
// its kind, actor, channel, time and data, the data with only idKey: id
// added when idKey is set (the ticket's or grant's id, which only the
// store knows).
func eventAsGiven(t *testing.T, got, want queue.Event, idKey, id, what string) {
	t.Helper()
	eq(t, got.Kind, want.Kind, what+": kind")
	eq(t, got.Actor, want.Actor, what+": actor")
	eq(t, got.Channel, want.Channel, what+": channel")
	timeEq(t, got.At, want.At, what+": at")
	data := want.Data
	if idKey != "" {
		m := map[string]any{}
		if len(data) > 0 {
			noErr(t, json.Unmarshal(data, &m), what+": the given data")
		}
		m[idKey] = id
		data, _ = json.Marshal(m)
	}
	if len(data) == 0 {
		if len(got.Data) != 0 && string(got.Data) != "null" {
			t.Fatalf("%s: data %s, want none", what, got.Data)
		}
		return
	}
	jsonEq(t, got.Data, data, what+": data")
}

// newestOf is the newest event of kind on the action.
func newestOf(t *testing.T, s Store, actionID, kind string) queue.Event {
	t.Helper()
	for _, ev := range events(t, s, actionID) {
		if ev.Kind == kind {
			return ev
		}
	}
	t.Fatalf("action %s: no %s event", actionID, kind)
	return queue.Event{}
}

// routedAction submits a pending action whose rule reminds every 10
// minutes and escalates after 30.
func routedAction(t *testing.T, s Store, key string) *queue.Action {
	t.Helper()
	a := newAction(classify.AtMostOnce, "send_customer_email", key, at(0))
	a.Spec.Approval = &classify.Approval{Required: 1, RemindAfter: 10 * time.Minute, EscalateAfter: 30 * time.Minute}
	return submit(t, s, a)
}

// other is an event no store would make up: the stores write what they
// are given.
func other(kind string, at time.Time, data string) queue.Event {
	ev := queue.Event{Kind: kind, Actor: "sweeper:other", Channel: "ops", At: at}
	if data != "" {
		ev.Data = json.RawMessage(data)
	}
	return ev
}

var sweepTests = []test{
	{"RemindAndEscalateWithTheDomainsEvents", func(t *testing.T, s Store) {
		a := routedAction(t, s, "route:1")
		n, err := s.ActionRemindDue(t.Context(), queue.ReminderDue(at(10*time.Minute-time.Second), 10))
		noErr(t, err, "remind early")
		eq(t, n, 0, "reminded before remind_after")
		p := queue.ReminderDue(at(10*time.Minute), 10)
		n, err = s.ActionRemindDue(t.Context(), p)
		noErr(t, err, "remind")
		eq(t, n, 1, "reminded")
		eventAsGiven(t, newestOf(t, s, a.ID, queue.EventReminder), p.Event, "", "", "reminder")
		n, err = s.ActionRemindDue(t.Context(), queue.ReminderDue(at(15*time.Minute), 10))
		noErr(t, err, "remind again")
		eq(t, n, 0, "reminded twice in one interval")

		e := queue.EscalationDue(at(30*time.Minute), 10)
		n, err = s.ActionEscalateDue(t.Context(), e)
		noErr(t, err, "escalate")
		eq(t, n, 1, "escalated")
		eventAsGiven(t, newestOf(t, s, a.ID, queue.EventEscalated), e.Event, "", "", "escalated")
		n, err = s.ActionEscalateDue(t.Context(), queue.EscalationDue(at(2*time.Hour), 10))
		noErr(t, err, "escalate again")
		eq(t, n, 0, "escalated twice")
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventReminder), 1, "reminder events")
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventEscalated), 1, "escalated events")
	}},
	{"EventsWrittenAsGiven", func(t *testing.T, s Store) {
		// Values no store writes of its own: each is written as it is.
		exp := newAction(classify.AtMostOnce, "send_customer_email", "given:exp", at(0))
		exp.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, exp)
		p := queue.DueParams{Now: at(time.Hour), Limit: 10, Event: other(queue.EventExpired, at(time.Hour+time.Second), `{"why":"given"}`)}
		got, err := s.ActionExpireDue(t.Context(), p)
		noErr(t, err, "expire")
		eq(t, len(got), 1, "expired")
		strPtrEq(t, get(t, s, exp.ID).DecidedBy, ptr("sweeper:other"), "a pending action is decided by the event's actor")
		eventAsGiven(t, newestOf(t, s, exp.ID, queue.EventExpired), p.Event, "", "", "expired")

		stale := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "given:stale", at(0))
		p = queue.DueParams{Now: at(time.Hour), Limit: 10, Event: other(queue.EventTicketOpened, at(time.Hour), `{"kind":"stale","why":"given"}`)}
		opened, err := s.TicketOpenStale(t.Context(), p)
		noErr(t, err, "open stale")
		eq(t, len(opened), 1, "opened")
		eventAsGiven(t, newestOf(t, s, stale.ID, queue.EventTicketOpened), p.Event, "ticket", opened[0].ID, "ticket_opened")

		a := routedAction(t, s, "given:route")
		p = queue.DueParams{Now: at(time.Hour), Limit: 10, Event: other(queue.EventEscalated, at(time.Hour), `{"why":"given"}`)}
		n, err := s.ActionEscalateDue(t.Context(), p)
		noErr(t, err, "escalate")
		eq(t, n, 1, "escalated")
		eventAsGiven(t, newestOf(t, s, a.ID, queue.EventEscalated), p.Event, "", "", "escalated")
		p = queue.DueParams{Now: at(time.Hour), Limit: 10, Event: other(queue.EventReminder, at(time.Hour), "")}
		n, err = s.ActionRemindDue(t.Context(), p)
		noErr(t, err, "remind")
		eq(t, n, 1, "reminded")
		eventAsGiven(t, newestOf(t, s, a.ID, queue.EventReminder), p.Event, "", "", "reminder")

		pl := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "given:plan", 1, at(0))
		p = queue.DueParams{Now: at(2 * time.Hour), Limit: 10, Event: other(queue.EventPlanExpired, at(2*time.Hour), `{"why":"given"}`)}
		ids, err := s.PlanExpireDue(t.Context(), p)
		noErr(t, err, "expire plans")
		if len(ids) != 1 || ids[0] != pl.ID {
			t.Fatalf("expired plans %v, want %s", ids, pl.ID)
		}
		strPtrEq(t, getPlan(t, s, pl.ID).DecidedBy, ptr("sweeper:other"), "a pending plan is decided by the event's actor")
		evs, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventPlanExpired, Limit: 10})
		noErr(t, err, "list plan_expired")
		eq(t, len(evs), 1, "plan_expired events")
		eq(t, evs[0].Subject, queue.PlanActorPrefix+pl.ID, "plan_expired subject")
		eventAsGiven(t, evs[0], p.Event, "", "", "plan_expired")
	}},
	{"EventWithoutKindRefused", func(t *testing.T, s Store) {
		exp := newAction(classify.AtMostOnce, "send_customer_email", "nokind:exp", at(0))
		exp.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, exp)
		stale := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "nokind:stale", at(0))
		routed := routedAction(t, s, "nokind:route")
		pl := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "nokind:plan", 1, at(0))
		// Everything is due; an event of no kind (the rest given) is
		// refused before anything is written.
		p := queue.DueParams{Now: at(10 * time.Hour), Limit: 10,
			Event: queue.Event{Actor: queue.SystemActor, At: at(10 * time.Hour)}}
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, queue.ErrNoEvent) {
				t.Fatalf("%s with an event of no kind: %v, want ErrNoEvent", what, err)
			}
		}
		_, err := s.ActionExpireDue(t.Context(), p)
		refused("ActionExpireDue", err)
		_, err = s.TicketOpenStale(t.Context(), p)
		refused("TicketOpenStale", err)
		_, err = s.ActionRemindDue(t.Context(), p)
		refused("ActionRemindDue", err)
		_, err = s.ActionEscalateDue(t.Context(), p)
		refused("ActionEscalateDue", err)
		_, err = s.PlanExpireDue(t.Context(), queue.DueParams{Now: at(10 * time.Hour), Limit: 10})
		refused("PlanExpireDue", err)

		eq(t, get(t, s, exp.ID).State, queue.StatePending, "not expired")
		eq(t, len(eventKinds(t, s, exp.ID)), 1, "events of the unexpired action")
		cur := get(t, s, stale.ID)
		if cur.Ticket != nil {
			t.Fatalf("a ticket was opened: %+v", cur.Ticket)
		}
		eq(t, len(eventKinds(t, s, stale.ID)), 1, "events of the claim")
		if r := get(t, s, routed.ID); r.EscalatedAt != nil {
			t.Fatalf("escalated at %v: nothing should be written", r.EscalatedAt)
		}
		eq(t, len(eventKinds(t, s, routed.ID)), 1, "events of the routed action")
		eq(t, getPlan(t, s, pl.ID).State, queue.PlanPending, "plan not expired")
	}},
}
