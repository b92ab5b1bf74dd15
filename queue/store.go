package queue

import (
	"context"
	"encoding/json"
	"time"
)

// Reader is the read side of Store, which the faces (REST, MCP, dashboard,
// Slack) and the executors read directly, as WTF Dial's handlers call its
// storage: a read carries no rule, so the Service does not wrap it. Every
// Store is a Reader.
type Reader interface {
	// ActionGetByID returns the action with its Ticket, or ErrNotFound.
	ActionGetByID(ctx context.Context, id string) (*Action, error)
	// ActionList returns actions matching p, in p's order, at most p.Limit.
	ActionList(ctx context.Context, p ActionListParams) ([]*Action, error)
	// ActionCountByState counts actions per state, for metrics.
	ActionCountByState(ctx context.Context) (map[State]int64, error)
	// EventList returns events matching p, newest first.
	EventList(ctx context.Context, p EventListParams) ([]Event, error)
	// TicketGetByID returns the ticket or ErrNotFound.
	TicketGetByID(ctx context.Context, id string) (*Ticket, error)
	// TicketList returns tickets matching p, oldest first.
	TicketList(ctx context.Context, p TicketListParams) ([]*Ticket, error)
	// TicketCheckGet returns ticket id's verifier schedule, or ErrNotFound
	// when no verifier was asked about it yet.
	TicketCheckGet(ctx context.Context, id string) (TicketCheck, error)
	// TicketCountOpen counts open tickets.
	TicketCountOpen(ctx context.Context) (int64, error)
	// NotificationList returns an action's notifications, oldest first.
	NotificationList(ctx context.Context, actionID string) ([]NotificationRecord, error)
	// GrantGetByID returns the grant (Uses counted) or ErrNotFound.
	GrantGetByID(ctx context.Context, id string) (*Grant, error)
	// GrantList returns grants matching p, newest first.
	GrantList(ctx context.Context, p GrantListParams) ([]*Grant, error)
	// GrantFind returns the grant that would approve the submission p
	// describes (as GrantTry would pick it), or ErrNotFound; it writes
	// nothing.
	GrantFind(ctx context.Context, p GrantFindParams) (*Grant, error)
	// PolicyHits counts the decisions of each policy rule (events on
	// channel policy) since p.Week, and of those since p.Day.
	PolicyHits(ctx context.Context, p PolicyHitsParams) ([]PolicyHit, error)
	// OverviewStore summarises the queue for GET /overview (overview.go).
	OverviewStore
	// PlanReader reads plans (plan.go).
	PlanReader

	// Subscribe delivers a Change for every state change made through any
	// process sharing the database, until the subscription is cancelled.
	Subscribe() Subscription
	// SubscribeAction is Subscribe for the changes of one action: what a
	// long-poll needs, at the cost of that action's changes only. wake,
	// when not nil, is called without blocking after each delivery and
	// when the subscription closes (Hub.SubscribeAction).
	SubscribeAction(id string, wake func()) Subscription
	// SubscribePending is Subscribe that also announces, within a second,
	// new pending actions (possibly without their id): what the live queue
	// needs. Finding them may cost the store a periodic query, made only
	// while such a subscriber exists.
	SubscribePending() Subscription
	// SupportsTokenGuard reports whether the store honours TokenHash in
	// ActionSubmitParams and ActionTransitionParams (PostgreSQL): a caller
	// that remembers which tokens it has seen valid need not look the token
	// up first, because the statement itself refuses a token revoked
	// since. A store that does not refuses a TokenHash.
	SupportsTokenGuard() bool
	// Ping checks that storage is reachable.
	Ping(ctx context.Context) error
}

// Store is the storage seam, shaped like River's driver: every method takes
// the context and at most one params struct, and returns one result beside
// the error. Every state change is one conditional statement checked by its
// row count, and intent uniqueness is a database constraint;
// implementations must never check-then-write in Go. The conformance suite
// in storetest runs against every implementation (storage.Store adds the
// accounts half).
type Store interface {
	Reader

	// ActionSubmit inserts p.Action as the holder of its intent key
	// (claim-first) and records p.Event (kind submitted) for it in the same
	// transaction; the store assigns Action.Attempt (1 + the highest
	// earlier attempt of the key). When the key is already held, nothing is
	// inserted and the holder is returned with Created false. At-least-once
	// actions (state recorded) are always inserted as attempt 1 and hold
	// nothing.
	//
	// A conflict holds its intent: when nothing holds the key but a
	// conflict ticket is open on its latest attempt (the highest attempt
	// number of a class other than at-least-once), nothing is inserted, no
	// grant is used, and that attempt is returned with its ticket and
	// UnderReview set. The check and the insert are one statement (one
	// write transaction on SQLite), so a ticket opened by another process
	// is seen.
	//
	// A store may also record the replay in the same statement when the
	// holder has the action's tool and a payload of exactly the same text
	// (an event of kind replayed, or in_progress_refused for an
	// exactly-once action in progress, by the event's actor and channel at
	// CreatedAt), and then reports ReplayRecorded; otherwise the Service
	// compares the payloads as JSON values and records the event itself.
	//
	// With p.TokenHash set (only for a store whose SupportsTokenGuard is
	// true) nothing is written and the error has CodeUnauthorized unless an
	// active agent token has that hash when the statement runs.
	ActionSubmit(ctx context.Context, p ActionSubmitParams) (ActionSubmitResult, error)
	// ActionTransition moves one action from one of p.From to p.To in one
	// conditional update and appends p.Event in the same transaction. When
	// the action is not in p.From (or p.Unexpired fails), it returns the
	// current action and an error wrapping ErrStateMismatch; ErrNotFound for
	// an unknown id.
	ActionTransition(ctx context.Context, p ActionTransitionParams) (*Action, error)
	// ActionDecide records one staff decision in one transaction that locks
	// the action first (PostgreSQL SELECT … FOR UPDATE; SQLite's single
	// writer), applies PlanDecision to the locked row and writes the plan:
	// the approval row (unique per action and user), the action's approvals
	// column and, when the plan says so, the conditional transition, with
	// the plan's event. It returns the action as it then is. A refusal by
	// PlanDecision is returned with the current action (ErrStateMismatch
	// or CodeForbidden) and nothing written; ErrNotFound for an unknown id.
	ActionDecide(ctx context.Context, p ActionDecideParams) (ActionDecideResult, error)
	// ActionExpireDue moves pending and approved actions whose expires_at is
	// at or before p.Now to expired (decided_by stays as it was for approved
	// ones, p.Event's actor for pending ones), with p.Event each.
	ActionExpireDue(ctx context.Context, p DueParams) ([]*Action, error)
	// ActionRemindDue writes p.Event (a reminder) for every pending action
	// whose rule's remind_after has passed since its last reminder (or its
	// submission), and ActionEscalateDue p.Event (escalated), once, for
	// every pending action whose escalate_after has passed since its
	// submission (EscalatedAt is then set, which widens who may decide).
	// Each is a conditional update: concurrent sweeps send one each per
	// interval. They return how many actions they changed.
	ActionRemindDue(ctx context.Context, p DueParams) (int, error)
	ActionEscalateDue(ctx context.Context, p DueParams) (int, error)

	// EventInsert appends an event that changes no state (a replay, a refusal).
	EventInsert(ctx context.Context, ev Event) error
	// StaffEventInsert appends an event of no action (ev.ActionID is
	// ignored) about ev.Subject: a sign-in or a refused one, a user or
	// token change (Service.Staff().Record). It notifies no channel.
	StaffEventInsert(ctx context.Context, ev Event) error

	// GrantRevoke revokes an unrevoked grant in one conditional update and
	// records p.Event in the same transaction; a grant revoked already is
	// returned as it is with an error wrapping ErrStateMismatch, an unknown
	// one is ErrNotFound.
	GrantRevoke(ctx context.Context, p GrantRevokeParams) (*Grant, error)

	// TicketOpenStale opens one stale ticket for every in_progress action
	// whose claim deadline is at or before p.Now and that has no open
	// ticket of that kind, with p.Event each (its data with the ticket's id
	// added, as "ticket"). Safe to run
	// concurrently.
	TicketOpenStale(ctx context.Context, p DueParams) ([]*Ticket, error)
	// TicketOpenConflict records p.Event (an outcome_conflict report) and
	// opens a conflict ticket for the action unless one is open already.
	TicketOpenConflict(ctx context.Context, p TicketOpenConflictParams) (*Ticket, error)
	// TicketResolve resolves an open ticket: it locks the action, then the
	// ticket, and writes what PlanTicketResolution computes from them (the
	// action's move, the resolved ticket, the events in order), announcing
	// a move as any state change. A ticket that is not open:
	// ErrTicketNotOpen with the current ticket.
	TicketResolve(ctx context.Context, p TicketResolveParams) (TicketResolveResult, error)

	// TicketChecks keep the verifiers' asking schedule (verify.go).
	TicketChecks
	// Outbox stores notifications (notification.go).
	Outbox
	// ReasonPrompts records the chat messages that ask for a rejection's
	// reason (reasonprompt.go).
	ReasonPrompts
	// PlanStore stores plans (plan.go).
	PlanStore
	// Close releases the store; waiters see their channels closed.
	Close() error
}

// ActionSubmitParams is one submission: the new action and its submitted
// event.
type ActionSubmitParams struct {
	Action *Action
	Event  Event
	// Decision, when set, is recorded too: a policy rule's decision of the
	// new action (approved, rejected, policy_human), inserted only with it.
	Decision *Event
	// Grant, when set, lets an active grant that matches the new (pending)
	// action approve it in the same transaction (GrantTry).
	Grant *GrantTry
	// TokenHash, when set, makes the claim conditional on an active agent
	// token with this hash (Store.SupportsTokenGuard).
	TokenHash string
	// PlanStep, when set, uses that plan step for the new action in the
	// same transaction (PlanStepClaim); a submission without one costs the
	// store nothing more.
	PlanStep *PlanStepClaim
}

// ActionSubmitResult is what a submission found or made.
type ActionSubmitResult struct {
	// Holder is the new action (Created) or the one that holds the key.
	Holder *Action
	// Created: the action was inserted and now holds its key.
	Created bool
	// ReplayRecorded: the store recorded the replay event itself.
	ReplayRecorded bool
	// UnderReview: nothing holds the key, but a conflict ticket is open on
	// its latest attempt (Holder, with that ticket as its Ticket), so
	// nothing was inserted and no grant was used.
	UnderReview bool
	// PlanStepRefused: p.PlanStep could not be used (the plan is not
	// approved or expired, the step was used, an earlier step of an
	// ordered plan is not done), so nothing was inserted.
	PlanStepRefused bool
}

// ActionDecideResult is the action after a decision and what the decision did.
type ActionDecideResult struct {
	Action  *Action
	Outcome DecideOutcome
}

// DueParams select what has come due: at or before Now, at most Limit per
// statement (the sweep's expiries, stale tickets, reminders, escalations),
// and the event written for each: the domain's (ExpiryDue, StaleDue,
// ReminderDue, EscalationDue, PlanExpiryDue), which the store writes as it
// is, adding only the id of the action (or plan, or ticket) it is about. A
// store refuses an Event without a kind with ErrNoEvent.
type DueParams struct {
	Now   time.Time
	Limit int
	Event Event
}

// TicketOpenConflictParams report an outcome that contradicts the stored one.
type TicketOpenConflictParams struct {
	ActionID string
	Now      time.Time
	Event    Event // the outcome_conflict event to record
}

// TicketResolveResult is the action and the ticket after a resolution (or,
// with ErrTicketNotOpen, as they are).
type TicketResolveResult struct {
	Action *Action
	Ticket *Ticket
}

// Subscription is a stream of changes; Cancel ends it and closes Changes.
type Subscription struct {
	Changes <-chan Change
	Cancel  func()
}

// BatchStats counts what a store that batches its hot statements did since
// it opened: batches sent (PostgreSQL) or write transactions committed
// (SQLite's group commit) and the calls they carried, batches refused as a
// whole (their calls then ran one by one), and, on PostgreSQL, the replay
// lookups that found the holder or went on to the claim.
type BatchStats struct {
	Batches, Calls, Refused int64
	// Queues splits Batches, Calls and Refused by the store's batching
	// queue (PostgreSQL: submissions and transitions; SQLite: writes), whose
	// batch sizes mean different things.
	Queues                      []BatchQueueStats
	LookupsFound, LookupsMissed int64
	// Lookups says the store runs hinted replay lookups at all
	// (PostgreSQL), so that /metrics shows no counter that cannot move.
	Lookups bool
}

// BatchQueueStats is one batching queue's part of BatchStats.
type BatchQueueStats struct {
	Name                    string
	Batches, Calls, Refused int64
}

// BatchStatser is a store that reports BatchStats (for /metrics).
type BatchStatser interface {
	BatchStats() BatchStats
}

// ActionListParams filters and orders a listing. Cursor-based keyset
// pagination over (created_at, id).
type ActionListParams struct {
	// IDs, when not nil, restricts the list to these actions (malformed
	// ids match nothing).
	IDs             []string
	IntentKey       string
	IntentKeyPrefix string
	State           State
	Tool            string
	// ServerExecuted restricts the list to actions a server executor
	// performs (Action.ServerExecuted: a webhook or an MCP upstream).
	ServerExecuted bool
	// Held restricts the list to actions that hold their intent key
	// (Action.HoldsIntent): with IntentKey, the key's holder if any.
	Held bool
	// GrantID restricts the list to the actions that grant approved.
	GrantID string
	// Oldest lists oldest first (the approval queue); default newest first.
	Oldest bool
	// After continues after this (created_at, id) position in the list order.
	After *Cursor
	Limit int
}

// Cursor is a keyset position.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// ActionTransitionParams describe one conditional state change. Nil fields
// are left as they are.
type ActionTransitionParams struct {
	ID   string
	From []State
	To   State
	Now  time.Time
	// Unexpired adds "and expires_at is null or after Now" to the condition,
	// so an approval cannot be given after expiry whether or not the sweep ran.
	Unexpired bool
	// RequestedBy, when set, adds "and requested_by = RequestedBy": only
	// the agent that submitted an action may drive it.
	RequestedBy string
	// AgentExecuted adds "and no server executor performs it"
	// (Action.ServerExecuted): for a webhook or upstream tool only the
	// dispatcher and operators finish the action.
	AgentExecuted bool

	DecidedBy       *string
	DecisionNote    *string
	DecidedAt       *time.Time
	ApprovedPayload json.RawMessage
	Result          json.RawMessage
	Error           *string
	ClaimedAt       *time.Time
	ClaimedBy       *string
	ClaimDeadline   *time.Time
	FinishedAt      *time.Time
	ExpiresAt       *time.Time

	Event Event
	// ResolveStale, when set, resolves the action's open stale ticket, if
	// any, in the same transaction, as it says (a late report: the
	// agent's, its webhook's or a verifier's proof). The store writes its
	// values as they are, after Event and with the action's row locked
	// first, adding only the ticket's id to its event's data.
	ResolveStale *StaleResolution
	// TokenHash, when set, makes the transition conditional on an active
	// agent token with this hash when its statement runs: otherwise nothing
	// moves and the store answers an error with CodeUnauthorized, not the
	// action. Only a store whose SupportsTokenGuard is true honours it;
	// other stores refuse it.
	TokenHash string
}

// EventListParams filters the event log.
type EventListParams struct {
	ActionID string
	Kind     string
	Actor    string
	BeforeID int64 // keyset: events with id < BeforeID; 0 for the newest
	Limit    int
}

// PolicyHitsParams are the two windows of PolicyHits.
type PolicyHitsParams struct {
	Day, Week time.Time
}

// PolicyHit is how often one rule of one tool decided: in the last day and
// the last week.
type PolicyHit struct {
	Tool, Rule string
	Day, Week  int64
}

// TicketListParams filters tickets.
type TicketListParams struct {
	State    TicketState // "" for all
	ActionID string
	Limit    int
}

// TicketResolveParams resolve one ticket.
type TicketResolveParams struct {
	TicketID string
	Now      time.Time
	By       string // user:EMAIL
	Outcome  State  // done or failed
	Result   json.RawMessage
	Note     string
	// Channel is where the finding was made; "" is the dashboard.
	Channel string
}

// Change tells subscribers that an action changed state. A Change with an
// empty ActionID and State pending means "new pending approvals exist"
// without naming them (PostgreSQL finds those by polling, not NOTIFY).
type Change struct {
	ActionID string
	State    State
}
