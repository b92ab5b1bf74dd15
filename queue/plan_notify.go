package queue

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// A plan reaches people as an action does (CONTRACT section 19): its
// events go through the same outbox (NotifyingEventKinds), to the channels
// its human steps' tools name (PlanChannels), and a pending plan is
// reminded of and escalated on its steps' schedules (Plans.RouteDue).

// Plan event kinds the sweep writes (subject plan:ID).
const (
	EventPlanReminder  = "plan_reminder"
	EventPlanEscalated = "plan_escalated"
)

// PlanSubject is the subject of a plan's events.
func PlanSubject(id string) string { return PlanActorPrefix + id }

// PlanOfEvent is the plan an event is about, or "".
func PlanOfEvent(ev Event) string {
	if ev.ActionID != "" {
		return ""
	}
	id, ok := strings.CutPrefix(ev.Subject, PlanActorPrefix)
	if !ok {
		return ""
	}
	return id
}

// PlanNotificationType is the event type (classify.EventTypes) a plan's
// event tells channels about, or "" for one that tells nobody: the
// proposal of a plan that needed no person, or an approval that counted
// toward the quorum.
func PlanNotificationType(ev Event) string {
	switch ev.Kind {
	case EventPlanSubmitted:
		var d struct {
			State PlanState `json:"state"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.State == PlanPending {
			return classify.EventPlanPending
		}
	case EventPlanApproved:
		return classify.EventPlanApproved
	case EventPlanRejected:
		return classify.EventPlanRejected
	case EventPlanChanges:
		return classify.EventPlanChangesRequested
	case EventPlanCancelled:
		return classify.EventPlanCancelled
	case EventPlanExpired:
		return classify.EventPlanExpired
	case EventPlanReminder:
		return classify.EventPlanReminder
	case EventPlanEscalated:
		return classify.EventPlanEscalated
	}
	return ""
}

// PlanChannels is the channels that hear of a plan's event of type typ:
// those the approval rule of any of its human steps names (as for that
// step's action), and those that list typ in their events, each once.
func PlanChannels(reg *classify.Registry, typ string, pl *Plan) []classify.Channel {
	var out []classify.Channel
	add := func(cs []classify.Channel) {
		for _, c := range cs {
			if !slices.ContainsFunc(out, func(o classify.Channel) bool { return o.Name == c.Name }) {
				out = append(out, c)
			}
		}
	}
	add(reg.ChannelsFor(typ, classify.Tool{}))
	for _, st := range pl.Steps {
		if st.Decision == StepHuman && st.Approval != nil {
			add(reg.ChannelsFor(typ, classify.Tool{Approval: st.Approval}))
		}
	}
	return out
}

// planRouted marks ev (about pl) unrouted when it tells no channel of the
// tools file in force, so that the fan-out never reads it.
func (s *Service) planRouted(ev Event, pl *Plan) Event {
	typ := PlanNotificationType(ev)
	ev.Unrouted = typ == "" || len(PlanChannels(s.Registry(), typ, pl)) == 0
	return ev
}

// planWake wakes this process's outbox after a plan's event that a channel
// hears of committed: no action's state change announces it.
func (s *Service) planWake(ev Event) {
	if !ev.Unrouted && s.opts.OnEvents != nil {
		s.opts.OnEvents()
	}
}

// Escalated reports whether a pending plan has been escalated: the
// escalate_to groups of its steps may decide it from then on.
func (p *Plan) Escalated() bool { return p.EscalatedAt != nil }

// planRouteAfter is the shortest remind_after and escalate_after of a
// plan's human steps: a plan is reminded of as often as its most urgent
// step's action would be, and escalated when the first of them would be.
func (p *Plan) planRouteAfter() (remind, escalate time.Duration) {
	for _, st := range p.Steps {
		if st.Decision != StepHuman || st.Approval == nil {
			continue
		}
		if d := st.Approval.RemindAfter; d > 0 && (remind == 0 || d < remind) {
			remind = d
		}
		if d := st.Approval.EscalateAfter; d > 0 && (escalate == 0 || d < escalate) {
			escalate = d
		}
	}
	return remind, escalate
}

// PlanRouteMarkParams record one reminder or escalation of a pending
// plan: the store sets the column (reminded_at, or escalated_at with
// Escalate) to Now only while the plan is pending and the column is still
// Prev (nil: unset), and writes Event in the same transaction.
type PlanRouteMarkParams struct {
	ID       string
	Escalate bool
	Prev     *time.Time
	Now      time.Time
	Event    Event
}

// maxRouteDuePlans bounds the pending plans one sweep reads.
const maxRouteDuePlans = 1000

// RouteDue reminds of and escalates the pending plans that are due, as
// the sweep does for actions (escalation first, once; reminders every
// remind_after while pending). Any number of processes may run it: each
// mark is conditional on the column the process read.
func (ps Plans) RouteDue(ctx context.Context) (reminded, escalated int, err error) {
	s := ps.s
	now := s.Now()
	plans, err := s.store.PlanList(ctx, PlanListParams{State: PlanPending, Now: now, Limit: maxRouteDuePlans})
	if err != nil {
		return 0, 0, err
	}
	for _, pl := range plans {
		pl.Settle(now)
		if pl.State != PlanPending {
			continue
		}
		remind, escalate := pl.planRouteAfter()
		if escalate > 0 && pl.EscalatedAt == nil && !pl.CreatedAt.Add(escalate).After(now) {
			ok, err := ps.mark(ctx, pl, true, nil, EventPlanEscalated, now)
			if err != nil {
				return reminded, escalated, err
			}
			if ok {
				escalated++
			}
		}
		from := pl.CreatedAt
		if pl.RemindedAt != nil {
			from = *pl.RemindedAt
		}
		if remind > 0 && !from.Add(remind).After(now) {
			ok, err := ps.mark(ctx, pl, false, pl.RemindedAt, EventPlanReminder, now)
			if err != nil {
				return reminded, escalated, err
			}
			if ok {
				reminded++
			}
		}
	}
	return reminded, escalated, nil
}

func (ps Plans) mark(ctx context.Context, pl *Plan, escalate bool, prev *time.Time, kind string, now time.Time) (bool, error) {
	ev := ps.s.planRouted(Event{Subject: PlanSubject(pl.ID), Kind: kind, Actor: "system", At: now}, pl)
	ok, err := ps.s.store.PlanRouteMark(ctx, PlanRouteMarkParams{ID: pl.ID, Escalate: escalate, Prev: prev, Now: now, Event: ev})
	if ok {
		ps.s.planWake(ev)
	}
	return ok, err
}

// StepActions are a plan's steps as the actions they would be, for a
// channel to preview each as it previews an action (its tool's preview
// templates, what a message leaves out): the tool as the tools file in
// force defines it, with the step's approval rule. The actions are not
// stored; their ID is the plan's.
func (p *Plan) StepActions(reg *classify.Registry) []*Action {
	out := make([]*Action, 0, len(p.Steps))
	for _, st := range p.Steps {
		tool, _ := reg.Lookup(st.Tool)
		tool.Approval = st.Approval
		out = append(out, &Action{ID: p.ID, Tool: st.Tool, Class: st.Class, IntentKey: st.IntentKey, Payload: st.Payload,
			Warnings: st.Warnings, Spec: tool, State: StatePending, RequestedBy: p.Agent, Attempt: 1})
	}
	return out
}
