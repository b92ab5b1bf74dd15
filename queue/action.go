// Package queue is the domain of approvals: actions keyed by intent, their
// state machine, tickets, events, the rules of submitting, deciding and
// driving them (the Service), and the store interface. It knows nothing of
// HTTP or of any particular database: the adapters postgres and sqlite
// implement Store, and the background work runs beside it (maintenance).
package queue

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/approvals/approvals/classify"
)

// State is where an action is in its life.
type State string

const (
	StatePending  State = "pending"
	StateApproved State = "approved"
	StateRejected State = "rejected"
	// StateChangesRequested: a human asked for a revision. Final for the
	// attempt, and it releases the intent: the revised payload comes back
	// as the next attempt, which needs a fresh approval.
	StateChangesRequested State = "changes_requested"
	StateExpired          State = "expired"
	StateCancelled        State = "cancelled"
	StateInProgress       State = "in_progress"
	StateDone             State = "done"
	StateFailed           State = "failed"
	StateRecorded         State = "recorded"
)

// States lists every state, in lifecycle order.
var States = []State{StatePending, StateApproved, StateRejected, StateChangesRequested, StateExpired,
	StateCancelled, StateInProgress, StateDone, StateFailed, StateRecorded}

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// Final reports whether no transition leaves s (a long-poll answers at once).
func (s State) Final() bool { return slices.Contains(FinalStates, s) }

// FinalStates are the states no change leaves (State.Final); the stores
// read a plan as done when every step's action is in one of them.
var FinalStates = []State{StateDone, StateFailed, StateRejected, StateChangesRequested, StateExpired, StateCancelled, StateRecorded}

// HeldStates are the states that hold an intent key, for every class but
// at-least-once; the stores enforce one action per key among them with a
// partial unique index.
var HeldStates = []State{StatePending, StateApproved, StateRejected, StateInProgress, StateDone}

// HoldsIntent reports whether a holds its intent key: it is in one of
// HeldStates and not at-least-once, a class that holds nothing in any state
// (recorded, or done and failed after an upstream call). The predicate of
// the stores' partial unique index actions_held_intent says the same.
func (a *Action) HoldsIntent() bool {
	return a.Class != classify.AtLeastOnce && slices.Contains(HeldStates, a.State)
}

// Action is one requested side effect.
type Action struct {
	ID              string          `json:"id"`
	Tool            string          `json:"tool"`
	Class           classify.Class  `json:"class"`
	IntentKey       string          `json:"intent_key"`
	Attempt         int             `json:"attempt"`
	State           State           `json:"state"`
	Payload         json.RawMessage `json:"payload"`
	ApprovedPayload json.RawMessage `json:"approved_payload"`
	Result          json.RawMessage `json:"result"`
	Error           *string         `json:"error"`
	RequestedBy     string          `json:"requested_by"`
	DecidedBy       *string         `json:"decided_by"`
	DecisionNote    *string         `json:"decision_note"`
	CreatedAt       time.Time       `json:"created_at"`
	DecidedAt       *time.Time      `json:"decided_at"`
	ClaimedAt       *time.Time      `json:"claimed_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	ExpiresAt       *time.Time      `json:"expires_at"`
	Ticket          *Ticket         `json:"ticket"`
	Warnings        []string        `json:"warnings"`
	// ApprovalsRequired is the quorum of the tool's approval rule (1
	// without one); Approvals are the approvals given so far, oldest first.
	ApprovalsRequired int        `json:"approvals_required"`
	Approvals         []Approval `json:"approvals"`

	// Spec is the tool definition as it was when the action was submitted;
	// later changes of the tools file affect new submissions only.
	Spec classify.Tool `json:"-"`
	// ClaimedBy names who holds the claim while in_progress: the agent or
	// "dispatcher" for a webhook delivery.
	ClaimedBy *string `json:"-"`
	// Channel is how it was submitted: "api" or "mcp".
	Channel string `json:"-"`
	// EscalatedAt is when the sweep escalated the pending action (nil
	// before): from then on the rule's EscalateEmails may decide too.
	EscalatedAt *time.Time `json:"-"`
	// GrantID is the grant that approved the action at its submission
	// (decided_by grant:ID), or "".
	GrantID string `json:"-"`
}

// Agent returns the token name behind RequestedBy ("agent:NAME").
func (a *Action) Agent() string {
	const p = "agent:"
	if len(a.RequestedBy) > len(p) && a.RequestedBy[:len(p)] == p {
		return a.RequestedBy[len(p):]
	}
	return a.RequestedBy
}

// ClaimDeadline is when a claim (ClaimedAt) outlives its tool's
// claim_timeout and the sweep opens a stale ticket; nil when unclaimed.
func (a *Action) ClaimDeadline() *time.Time {
	if a.ClaimedAt == nil {
		return nil
	}
	d := a.ClaimedAt.Add(a.Spec.ClaimTimeout)
	return &d
}

// HasWebhook reports whether the webhook dispatcher, not the agent,
// executes it.
func (a *Action) HasWebhook() bool { return a.Spec.Executor != nil && a.Spec.Executor.Webhook != "" }

// ServerExecuted reports whether one of the server's executors (the webhook
// dispatcher or an MCP upstream) performs it, never the agent. The stores
// keep it in the column has_webhook, which predates upstreams: the
// executors list approved actions by it, and the agent's execute, complete
// and fail are refused by it.
func (a *Action) ServerExecuted() bool { return a.HasWebhook() || a.Spec.Upstream != "" }

// TicketKind says why a ticket was opened.
type TicketKind string

const (
	TicketStale    TicketKind = "stale"    // in_progress longer than claim_timeout
	TicketConflict TicketKind = "conflict" // a report contradicted the stored outcome
)

// TicketState is open or resolved.
type TicketState string

const (
	TicketOpen     TicketState = "open"
	TicketResolved TicketState = "resolved"
)

// Ticket asks an operator to find out whether an effect happened.
type Ticket struct {
	ID         string      `json:"id"`
	ActionID   string      `json:"-"`
	Kind       TicketKind  `json:"kind"`
	State      TicketState `json:"state"`
	OpenedAt   time.Time   `json:"opened_at"`
	ResolvedAt *time.Time  `json:"resolved_at"`
	ResolvedBy *string     `json:"resolved_by"`
	Outcome    *State      `json:"outcome"`
	Note       *string     `json:"note"`
}

// TicketEventData is the data of ticket_opened and ticket_resolved events,
// the same in every store: the ticket, its kind, and for a resolution the
// outcome, the note and any result the operator entered. Without a ticket
// id ("") it has no "ticket": the data of a resolution planned before the
// store knows which ticket it resolves (StaleResolution).
func TicketEventData(ticketID string, kind TicketKind, outcome State, note string, result json.RawMessage) json.RawMessage {
	m := map[string]any{"kind": kind}
	if ticketID != "" {
		m["ticket"] = ticketID
	}
	if outcome != "" {
		m["outcome"] = outcome
	}
	if note != "" {
		m["note"] = note
	}
	if len(result) > 0 {
		m["result"] = result
	}
	b, _ := json.Marshal(m)
	return b
}

// OperatorError is the error stored on an action an operator resolved as
// failed.
func OperatorError(note string) string { return "resolved by operator: " + note }

// LateReportNote is the note of a stale ticket that the agent's own late
// complete or fail resolved, or its webhook's answer (LateResolution).
const LateReportNote = "late report from the agent"

// Event is one entry of an action's append-only timeline, or a staff
// event (a login, a token or user change: accounts.StaffEvent), which
// belongs to no action and names its Subject instead. Every event is
// sealed in the audit chain (package audit).
type Event struct {
	ID       int64  `json:"id"`
	ActionID string `json:"action_id,omitempty"`
	// Subject is what a staff event is about (user:EMAIL, token:NAME); ""
	// for an action's event.
	Subject string          `json:"subject,omitempty"`
	Kind    string          `json:"kind"`
	Actor   string          `json:"actor"`
	Channel string          `json:"channel,omitempty"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Unrouted marks an event that notifies no channel, as the Service
	// judged when it wrote it (Service.unrouted): the store writes it as
	// already fanned out, so the outbox never reads it. False leaves the
	// judgment to the fan-out.
	Unrouted bool `json:"-"`
}

// IsReplayRecord reports whether events of kind only record a request that
// was answered from what is stored (a replay, or its refusal: the intent is
// in progress or held with another payload) and change no state. A store may
// commit them without waiting for the WAL flush: a crash of PostgreSQL can
// lose the last fraction of a second of them, never a decision, claim or
// outcome (docs/getting-started.md, "What a crash can lose").
func IsReplayRecord(kind string) bool {
	return kind == EventReplayed || kind == EventReused || kind == EventInProgressSeen
}

// Event kinds.
const (
	EventSubmitted      = "submitted"
	EventReplayed       = "replayed"
	EventReused         = "intent_key_reused"
	EventInProgressSeen = "in_progress_refused"
	EventApproved       = "approved"
	EventRejected       = "rejected"
	// EventChangesRequested is the third decision (pending → changes_requested).
	EventChangesRequested = "changes_requested"
	// EventApprovalCounted is one approval of a quorum that is not yet
	// complete; the last one is EventApproved.
	EventApprovalCounted = "approval_counted"
	// EventReminder and EventEscalated are written by the sweep for a
	// pending action that waited remind_after or escalate_after.
	EventReminder        = "reminder"
	EventEscalated       = "escalated"
	EventCancelled       = "cancelled"
	EventExpired         = "expired"
	EventClaimed         = "claimed"
	EventDelivery        = "delivery_started"
	EventDeliveryResult  = "delivery_unknown"
	EventCompleted       = "completed"
	EventFailed          = "failed"
	EventOutcomeConflict = "outcome_conflict"
	EventTicketOpened    = "ticket_opened"
	EventTicketResolved  = "ticket_resolved"
)
