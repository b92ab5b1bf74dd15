package queue

import (
	"encoding/json"
	"errors"
	"time"
)

// SystemActor is the actor of the events the system writes on its own: the
// sweep's expiries, stale tickets, reminders and escalations, a plan's
// expiry and the end of a user's grants (GrantSystemActor). It is also who
// decided a pending action or plan that expired.
const SystemActor = "system"

// SweepChannel is the channel of the sweep's events: none.
const SweepChannel = ""

// ErrNoEvent is what a store answers when it is asked to write an event
// without a kind (a DueParams not made by ExpiryDue, StaleDue, …): it
// writes nothing.
var ErrNoEvent = errors.New("no event to write: its kind is empty")

// SystemEvent is an event the system writes on its own at at, of no action
// yet (the store adds the action's id): by SystemActor, on SweepChannel.
func SystemEvent(kind string, at time.Time) Event {
	return Event{Kind: kind, Actor: SystemActor, Channel: SweepChannel, At: at}
}

// ExpiryDue selects the actions due to expire at now, at most limit: each
// is written with the event expired, whose actor also decides a pending one
// (Store.ActionExpireDue).
func ExpiryDue(now time.Time, limit int) DueParams {
	return DueParams{Now: now, Limit: limit, Event: SystemEvent(EventExpired, now)}
}

// PlanExpiryDue selects the plans due to expire at now, at most limit: each
// is written with the event plan_expired, whose actor also decides a
// pending one (PlanStore.PlanExpireDue).
func PlanExpiryDue(now time.Time, limit int) DueParams {
	return DueParams{Now: now, Limit: limit, Event: SystemEvent(EventPlanExpired, now)}
}

// StaleDue selects the claims held past their deadline at now, at most
// limit: each stale ticket opened is written with TicketOpened (the store
// adds the ticket's id to its data).
func StaleDue(now time.Time, limit int) DueParams {
	return DueParams{Now: now, Limit: limit, Event: TicketOpened(TicketStale, now)}
}

// ReminderDue selects the pending actions due for a reminder at now, at
// most limit, each written with the event reminder.
func ReminderDue(now time.Time, limit int) DueParams {
	return DueParams{Now: now, Limit: limit, Event: SystemEvent(EventReminder, now)}
}

// EscalationDue selects the pending actions due for escalation at now, at
// most limit, each written with the event escalated.
func EscalationDue(now time.Time, limit int) DueParams {
	return DueParams{Now: now, Limit: limit, Event: SystemEvent(EventEscalated, now)}
}

// TicketOpened is the event of a ticket of kind opened at at, its data
// without the ticket's id, which the store adds ("ticket").
func TicketOpened(kind TicketKind, at time.Time) Event {
	ev := SystemEvent(EventTicketOpened, at)
	ev.Data = TicketEventData("", kind, "", "", nil)
	return ev
}

// GrantEndOfUser is the event of a grant ended at at for reason (GrantEnd…)
// because its granting user lost the right to decide: by GrantSystemActor,
// on its channel, its data without the grant's id, which the store adds
// ("grant"). Its actor is also the grant's revoked_by.
func GrantEndOfUser(reason string, at time.Time) Event {
	data, _ := json.Marshal(map[string]string{"reason": reason})
	return Event{Kind: EventGrantRevoked, Actor: GrantSystemActor, Channel: GrantSystemActor, At: at, Data: data}
}
