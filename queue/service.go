package queue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/approvals/approvals/classify"
)

// Service is the one implementation of every rule of the contract; the REST
// API, the MCP endpoint and the dashboard all call it.
type Service struct {
	store Store
	reg   atomic.Pointer[classify.Registry]
	now   func() time.Time
	log   *slog.Logger
	opts  Options
	// stopping closes on shutdown and releases long-polls.
	stopping  chan struct{}
	closeOnce sync.Once
}

// Options configure a Service.
type Options struct {
	// Now is the clock; tests inject one. Default time.Now.
	Now func() time.Time
	// Logger, default slog.Default().
	Logger *slog.Logger
	// OnSubmit observes every submission's class and outcome (created,
	// replayed, intent_key_reused, in_progress, refused), for metrics.
	OnSubmit func(class classify.Class, outcome string)
	// WaitRecheck is the slow timed re-read of a long-poll, a fallback for a
	// lost notification. Default 2s.
	WaitRecheck time.Duration
}

// NewService returns a Service over store with the tools of reg.
func NewService(store Store, reg *classify.Registry, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WaitRecheck <= 0 {
		opts.WaitRecheck = 2 * time.Second
	}
	if reg == nil {
		reg = classify.Empty()
	}
	s := &Service{store: store, now: opts.Now, log: opts.Logger, opts: opts, stopping: make(chan struct{})}
	s.reg.Store(reg)
	return s
}

// Stop releases every long-poll with the current state of its action; call
// it when the server begins to shut down.
func (s *Service) Stop() { s.closeOnce.Do(func() { close(s.stopping) }) }

// Stopping is closed once Stop is called.
func (s *Service) Stopping() <-chan struct{} { return s.stopping }

// Registry returns the current tools.
func (s *Service) Registry() *classify.Registry { return s.reg.Load() }

// SetRegistry swaps the tools for new submissions; existing actions keep
// their snapshot.
func (s *Service) SetRegistry(r *classify.Registry) { s.reg.Store(r) }

// Store returns the underlying store.
func (s *Service) Store() Store { return s.store }

// Now returns the service clock's time in UTC, truncated to microseconds
// (what PostgreSQL keeps), so what is returned equals what is stored.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// SubmitRequest is one submission by an agent.
type SubmitRequest struct {
	Tool      string
	Payload   json.RawMessage // a JSON object
	IntentKey string          // optional when the tool has a template
	Agent     string          // token name
	Channel   string          // "api" or "mcp"
	// TokenHash, when set, asks the store to check in the claiming
	// statement that an active agent token has this hash (see
	// GuardedSubmitter): the caller took Agent from a cache, not from the
	// database. Only for a Service whose GuardsSubmissions is true.
	TokenHash string
}

// GuardsSubmissions reports whether the store can check agent tokens in the
// submission's own statement (SubmitRequest.TokenHash).
func (s *Service) GuardsSubmissions() bool {
	_, ok := s.store.(GuardedSubmitter)
	return ok
}

// SubmitResult says what a submission did.
type SubmitResult struct {
	Action   *Action
	Created  bool // a new action: 201
	Replayed bool // the stored action of the held intent: 200
}

// Submit runs the checks of the contract in order (payload, key, then the
// held action of the intent) and claims the intent in one statement.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	tool, registered := s.Registry().Lookup(req.Tool)
	res, err := s.submit(ctx, req, tool, registered)
	if s.opts.OnSubmit != nil {
		outcome := "created"
		switch {
		case err != nil && ErrorCode(err) != "":
			outcome = string(ErrorCode(err))
		case err != nil:
			outcome = "error"
		case res.Replayed:
			outcome = "replayed"
		}
		s.opts.OnSubmit(tool.Class, outcome)
	}
	return res, err
}

func (s *Service) submit(ctx context.Context, req SubmitRequest, tool classify.Tool, registered bool) (SubmitResult, error) {
	if req.Tool == "" {
		return SubmitResult{}, Errorf(CodeInvalidRequest, "tool is required")
	}
	var derived string
	if len(tool.Schema) == 0 && tool.Intent == "" {
		// Nothing reads the payload's value: checking it is one JSON
		// object spares decoding it (a tenth of a replay's server time).
		if !isJSONObject(req.Payload) {
			return SubmitResult{}, Errorf(CodeInvalidRequest, "payload must be a JSON object")
		}
	} else {
		payload, err := DecodeObject(req.Payload)
		if err != nil {
			return SubmitResult{}, Errorf(CodeInvalidRequest, "payload must be a JSON object")
		}
		if err := tool.Validate(payload); err != nil {
			return SubmitResult{}, payloadError(err)
		}
		if derived, err = tool.DeriveKey(payload); err != nil {
			return SubmitResult{}, payloadError(err)
		}
	}
	var warnings []string
	key := req.IntentKey
	switch {
	case derived != "":
		if key != "" && key != derived {
			return SubmitResult{}, Errorf(CodeIntentKeyMismatch,
				"intent_key %q differs from %q, the key derived from the payload by the template %q of tool %s", key, derived, tool.Intent, tool.Name)
		}
		key = derived
	case key == "" && tool.Class != classify.AtLeastOnce:
		if !registered {
			return SubmitResult{}, Errorf(CodeIntentKeyRequired, "tool %s is not registered, so it is at-most-once and needs an explicit intent_key (or Idempotency-Key header) naming the business intent", req.Tool)
		}
		return SubmitResult{}, Errorf(CodeIntentKeyRequired, "tool %s has no intent template: supply intent_key (or the Idempotency-Key header) naming the business intent, e.g. email:{customer_id}:{topic}", req.Tool)
	default:
		if key != "" {
			if err := classify.ValidateKey(key); err != nil {
				return SubmitResult{}, Errorf(CodeInvalidRequest, "intent_key: %v", err)
			}
			if classify.LooksRandom(key) {
				warnings = append(warnings, "intent_key_looks_random")
			}
		}
	}
	if !registered {
		warnings = append(warnings, "tool_not_registered")
	}

	now := s.Now()
	agent := "agent:" + req.Agent
	channel := req.Channel
	if channel == "" {
		channel = "api"
	}
	a := &Action{
		ID: NewID(now), Tool: req.Tool, Class: tool.Class, IntentKey: key, Attempt: 1,
		Payload: req.Payload, RequestedBy: agent, CreatedAt: now, Warnings: warnings,
		Spec: tool, Channel: channel,
	}
	switch tool.Class {
	case classify.AtMostOnce:
		a.State = StatePending
		exp := now.Add(tool.ExpiresAfter)
		a.ExpiresAt = &exp
	case classify.ExactlyOnce:
		a.State = StateInProgress
		a.ClaimedAt, a.ClaimedBy = &now, &agent
	default:
		a.State = StateRecorded
		a.FinishedAt = &now
	}
	ev := Event{Kind: EventSubmitted, Actor: agent, Channel: channel, At: now}
	var (
		holder                  *Action
		created, replayRecorded bool
		err                     error
	)
	if req.TokenHash != "" {
		gs, ok := s.store.(GuardedSubmitter)
		if !ok {
			return SubmitResult{}, errors.New("submit: this store cannot check agent tokens in the submission")
		}
		holder, created, replayRecorded, err = gs.ActionSubmitGuarded(ctx, a, ev, req.TokenHash)
	} else {
		holder, created, replayRecorded, err = s.store.ActionSubmit(ctx, a, ev)
	}
	if err != nil {
		return SubmitResult{}, err
	}
	if created {
		return SubmitResult{Action: holder, Created: true}, nil
	}
	// A recorded replay had the same tool and payload text: no need to compare.
	same := replayRecorded || holder.Tool == req.Tool && JSONEqual(holder.Payload, req.Payload)
	kind := EventReplayed
	switch {
	case !same:
		kind = EventReused
	case holder.State == StateInProgress && holder.Class == classify.ExactlyOnce:
		kind = EventInProgressSeen
	}
	// A replay repeats the action's own tool and payload, so only a reuse
	// keeps what the other caller sent (for the operator comparing them).
	var data json.RawMessage
	if kind == EventReused {
		data, _ = json.Marshal(map[string]any{"tool": req.Tool, "payload": req.Payload})
	}
	if !replayRecorded {
		if err := s.store.EventInsert(ctx, Event{ActionID: holder.ID, Kind: kind, Actor: agent, Channel: channel, At: now, Data: data}); err != nil {
			s.log.Warn("could not record event", "kind", kind, "action", holder.ID, "err", err)
		}
	}
	switch kind {
	case EventReused:
		what := "payload"
		if holder.Tool != req.Tool {
			what = "tool (" + holder.Tool + ")"
		}
		return SubmitResult{}, &Error{Code: CodeIntentKeyReused, Action: holder,
			Detail: fmt.Sprintf("intent %q is held by action %s (state %s) with a different %s; nothing was done", key, holder.ID, holder.State, what)}
	case EventInProgressSeen:
		return SubmitResult{}, &Error{Code: CodeInProgress, Action: holder,
			Detail: fmt.Sprintf("action %s for intent %q is in progress: do not act; read it later", holder.ID, key)}
	}
	return SubmitResult{Action: holder, Replayed: true}, nil
}

func payloadError(err error) error {
	var pe *classify.PayloadError
	if errors.As(err, &pe) {
		return Errorf(CodeInvalidPayload, "%s", pe.Error())
	}
	return Errorf(CodeInvalidPayload, "%v", err)
}

// Get returns one action.
func (s *Service) Get(ctx context.Context, id string) (*Action, error) {
	return s.store.ActionGetByID(ctx, id)
}

// MaxWait caps a long-poll.
const MaxWait = 60 * time.Second

// Wait returns the action once its state differs from until (default: its
// state now), at once for a final state, or at the deadline. It subscribes
// before reading, so a change between the two is not lost.
func (s *Service) Wait(ctx context.Context, id string, until State, d time.Duration) (*Action, error) {
	changes, cancel := s.store.Subscribe()
	defer cancel()
	a, err := s.store.ActionGetByID(ctx, id)
	if err != nil || d <= 0 || a.State.Final() {
		return a, err
	}
	if until == "" {
		until = a.State
	}
	if a.State != until {
		return a, nil
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	recheck := time.NewTicker(s.opts.WaitRecheck)
	defer recheck.Stop()
	for {
		select {
		case c, ok := <-changes:
			if !ok { // shutting down: answer with what is stored
				return s.store.ActionGetByID(ctx, id)
			}
			if c.ActionID != id {
				continue
			}
		case <-recheck.C:
		case <-s.stopping:
			return s.store.ActionGetByID(ctx, id)
		case <-deadline.C:
			return s.store.ActionGetByID(ctx, id)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		a, err = s.store.ActionGetByID(ctx, id)
		if err != nil || a.State != until || a.State.Final() {
			return a, err
		}
	}
}

// ListRequest filters a listing.
type ListRequest struct {
	IntentKey       string
	IntentKeyPrefix string
	State           State
	Tool            string
	Oldest          bool
	Limit           int
	Cursor          string // from a previous NextCursor
}

// List returns a page of actions and the cursor of the next page ("" at
// the end).
func (s *Service) List(ctx context.Context, r ListRequest) ([]*Action, string, error) {
	p := ActionListParams{IntentKey: r.IntentKey, IntentKeyPrefix: r.IntentKeyPrefix, State: r.State,
		Tool: r.Tool, Oldest: r.Oldest, Limit: r.Limit + 1}
	if r.Cursor != "" {
		c, err := DecodeCursor(r.Cursor)
		if err != nil {
			return nil, "", err
		}
		p.After = &c
	}
	list, err := s.store.ActionList(ctx, p)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(list) > r.Limit {
		list = list[:r.Limit]
		last := list[len(list)-1]
		next = EncodeCursor(Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return list, next, nil
}

// EncodeCursor makes an opaque page cursor.
func EncodeCursor(c Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (Cursor, error) {
	bad := Errorf(CodeInvalidRequest, "cursor is not a cursor returned by this API")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return Cursor{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !ValidID(id) {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: t, ID: id}, nil
}

// ActionsByID reads the actions with these ids in one query, keyed by id;
// unknown ids are absent.
func (s *Service) ActionsByID(ctx context.Context, ids []string) (map[string]*Action, error) {
	out := make(map[string]*Action, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := s.store.ActionList(ctx, ActionListParams{IDs: ids, Limit: len(ids)})
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		out[a.ID] = a
	}
	return out, nil
}

// Attempts lists every attempt of an intent, newest first.
func (s *Service) Attempts(ctx context.Context, key string) ([]*Action, error) {
	return s.store.ActionList(ctx, ActionListParams{IntentKey: key, Limit: 200})
}

// Events returns an action's timeline, oldest first.
func (s *Service) Events(ctx context.Context, actionID string) ([]Event, error) {
	evs, err := s.store.EventList(ctx, EventListParams{ActionID: actionID, Limit: 1000})
	if err != nil {
		return nil, err
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
	return evs, nil
}

// refusal says why a drive call by agent may not touch a: it is another
// agent's action, or (when agentExecuted) a webhook tool's. nil when only
// a's state is at issue. The transitions themselves carry the same
// conditions, so a drive call costs one statement; this only explains a
// mismatch.
func refusal(a *Action, agent, what string, agentExecuted bool) error {
	if a.Agent() != agent {
		return &Error{Code: CodeForbidden, Detail: fmt.Sprintf("action %s was submitted by %s; only that agent may drive it", a.ID, a.RequestedBy)}
	}
	if agentExecuted && a.HasWebhook() {
		return webhookOnly(a, what)
	}
	return nil
}

func invalidTransition(a *Action, what string) error {
	return &Error{Code: CodeInvalidTransition, Action: a,
		Detail: fmt.Sprintf("cannot %s action %s: it is %s", what, a.ID, a.State)}
}

func webhookOnly(a *Action, what string) error {
	return &Error{Code: CodeInvalidTransition, Action: a,
		Detail: fmt.Sprintf("cannot %s action %s: tool %s has a webhook executor, so only the dispatcher and operators finish it", what, a.ID, a.Tool)}
}

// DriveResult is the outcome of a drive call.
type DriveResult struct {
	Action   *Action
	Replayed bool // the call repeated one that already succeeded
}

// Execute hands an approved at-most-once action to its agent, once.
func (s *Service) Execute(ctx context.Context, id, agent, channel string) (*Action, error) {
	// The claim deadline needs the tool's claim_timeout, so Execute reads
	// the action first; the transition still carries every condition.
	a, err := s.store.ActionGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := refusal(a, agent, "execute", false); err != nil {
		return nil, err
	}
	if a.Class != classify.AtMostOnce {
		return nil, &Error{Code: CodeInvalidTransition, Action: a, Detail: fmt.Sprintf("execute is for at-most-once actions; %s is %s", a.ID, a.Class)}
	}
	if a.HasWebhook() {
		return nil, webhookOnly(a, "execute")
	}
	now := s.Now()
	by := "agent:" + agent
	deadline := now.Add(a.Spec.ClaimTimeout)
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StateApproved}, To: StateInProgress, Now: now, Unexpired: true,
		RequestedBy: by, AgentExecuted: true,
		ClaimedAt: &now, ClaimedBy: &by, ClaimDeadline: &deadline,
		Event: Event{ActionID: id, Kind: EventClaimed, Actor: by, Channel: channel, At: now},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "execute", true); err != nil {
			return nil, err
		}
		switch got.State {
		case StateInProgress:
			return nil, &Error{Code: CodeInProgress, Action: got, Detail: fmt.Sprintf("action %s is already being executed (claimed at %s); this is not permission to send", got.ID, fmtTime(got.ClaimedAt))}
		case StateApproved: // past its expiry
			if exp, err := s.expireOne(ctx, got, StateApproved); err == nil {
				got = exp
			}
			return nil, &Error{Code: CodeInvalidTransition, Action: got, Detail: fmt.Sprintf("the approval of action %s expired at %s; submit the intent again", got.ID, fmtTime(got.ExpiresAt))}
		}
		return nil, invalidTransition(got, "execute")
	}
	return got, err
}

// expireOne expires a single action that is due, as the sweep would.
func (s *Service) expireOne(ctx context.Context, a *Action, from State) (*Action, error) {
	now := s.Now()
	p := ActionTransitionParams{ID: a.ID, From: []State{from}, To: StateExpired, Now: now, FinishedAt: &now,
		Event: Event{ActionID: a.ID, Kind: EventExpired, Actor: "system", At: now}}
	if from == StatePending {
		sys := "system"
		p.DecidedBy, p.DecidedAt = &sys, &now
	}
	if a.ExpiresAt == nil || a.ExpiresAt.After(now) {
		return a, fmt.Errorf("action %s is not due", a.ID)
	}
	return s.store.ActionTransition(ctx, p)
}

// Complete records the effect's result: in_progress → done.
func (s *Service) Complete(ctx context.Context, id, agent string, result json.RawMessage, channel string) (DriveResult, error) {
	now := s.Now()
	by := "agent:" + agent
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StateInProgress}, To: StateDone, Now: now, Result: result, FinishedAt: &now,
		RequestedBy: by, AgentExecuted: true, ResolveStaleTicket: true,
		Event: Event{ActionID: id, Kind: EventCompleted, Actor: by, Channel: channel, At: now, Data: result},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "complete", true); err != nil {
			return DriveResult{}, err
		}
		switch {
		case got.State == StateDone && JSONEqual(got.Result, result):
			return DriveResult{Action: got, Replayed: true}, nil
		case got.State == StateDone || got.State == StateFailed:
			return DriveResult{}, s.outcomeConflict(ctx, got, by, channel, "complete", map[string]any{"result": result})
		}
		return DriveResult{}, invalidTransition(got, "complete")
	}
	return DriveResult{Action: got}, err
}

// Fail records a definite non-effect: in_progress → failed, releasing the
// intent.
func (s *Service) Fail(ctx context.Context, id, agent, errText, channel string) (DriveResult, error) {
	now := s.Now()
	by := "agent:" + agent
	data, _ := json.Marshal(map[string]string{"error": errText})
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StateInProgress}, To: StateFailed, Now: now, Error: &errText, FinishedAt: &now,
		RequestedBy: by, AgentExecuted: true, ResolveStaleTicket: true,
		Event: Event{ActionID: id, Kind: EventFailed, Actor: by, Channel: channel, At: now, Data: data},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "fail", true); err != nil {
			return DriveResult{}, err
		}
		switch got.State {
		case StateFailed:
			return DriveResult{Action: got, Replayed: true}, nil
		case StateDone:
			return DriveResult{}, s.outcomeConflict(ctx, got, by, channel, "fail", map[string]any{"error": errText})
		}
		return DriveResult{}, invalidTransition(got, "fail")
	}
	return DriveResult{Action: got}, err
}

// outcomeConflict keeps a contradicting report in the timeline and opens a
// conflict ticket: it may mean an effect happened twice.
func (s *Service) outcomeConflict(ctx context.Context, a *Action, by, channel, report string, data map[string]any) error {
	now := s.Now()
	data["report"] = report
	data["stored_state"] = a.State
	raw, _ := json.Marshal(data)
	if _, err := s.store.TicketOpenConflict(ctx, a.ID, now, Event{ActionID: a.ID, Kind: EventOutcomeConflict, Actor: by, Channel: channel, At: now, Data: raw}); err != nil {
		return err
	}
	if fresh, err := s.store.ActionGetByID(ctx, a.ID); err == nil {
		a = fresh
	}
	return &Error{Code: CodeOutcomeConflict, Action: a,
		Detail: fmt.Sprintf("action %s is already %s; this %s report contradicts it and was recorded, and an operator ticket is open: the effect may have happened twice", a.ID, a.State, report)}
}

// Cancel withdraws a pending or approved action before execution.
func (s *Service) Cancel(ctx context.Context, id, agent, channel string) (DriveResult, error) {
	now := s.Now()
	by := "agent:" + agent
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StatePending, StateApproved}, To: StateCancelled, Now: now,
		RequestedBy: by, DecidedBy: &by, DecidedAt: &now, FinishedAt: &now,
		Event: Event{ActionID: id, Kind: EventCancelled, Actor: by, Channel: channel, At: now},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "cancel", false); err != nil {
			return DriveResult{}, err
		}
		if got.State == StateCancelled && got.DecidedBy != nil && *got.DecidedBy == by {
			return DriveResult{Action: got, Replayed: true}, nil
		}
		return DriveResult{}, invalidTransition(got, "cancel")
	}
	return DriveResult{Action: got}, err
}

// DecideRequest is a staff decision.
type DecideRequest struct {
	ID      string
	By      string          // user:EMAIL
	Note    string          // required to reject
	Payload json.RawMessage // approve only: an edited payload, or nil
}

// Approve approves a pending action, exactly once.
func (s *Service) Approve(ctx context.Context, r DecideRequest) (DriveResult, error) {
	a, err := s.store.ActionGetByID(ctx, r.ID)
	if err != nil {
		return DriveResult{}, err
	}
	approved := a.Payload
	data := map[string]any{}
	if r.Note != "" {
		data["note"] = r.Note
	}
	if len(r.Payload) > 0 && !JSONEqual(r.Payload, a.Payload) {
		edited, err := DecodeObject(r.Payload)
		if err != nil {
			return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload must be a JSON object")
		}
		spec := a.Spec
		if err := spec.Validate(edited); err != nil {
			return DriveResult{}, payloadError(err)
		}
		if spec.Intent != "" {
			key, err := spec.DeriveKey(edited)
			if err != nil {
				return DriveResult{}, payloadError(err)
			}
			if key != a.IntentKey {
				return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload derives intent key %q, not %q: an edit may not change the intent", key, a.IntentKey)
			}
		}
		original, _ := DecodeObject(a.Payload)
		changed := changedFields(original, edited)
		sort.Strings(changed)
		data["changed_fields"] = changed
		data["approved_payload"] = json.RawMessage(r.Payload)
		approved = r.Payload
	}
	now := s.Now()
	exp := now.Add(a.Spec.ExpiresAfter)
	raw, _ := json.Marshal(data)
	p := ActionTransitionParams{
		ID: r.ID, From: []State{StatePending}, To: StateApproved, Now: now, Unexpired: true,
		DecidedBy: &r.By, DecidedAt: &now, ApprovedPayload: approved, ExpiresAt: &exp,
		Event: Event{ActionID: r.ID, Kind: EventApproved, Actor: r.By, Channel: "dashboard", At: now, Data: raw},
	}
	if r.Note != "" {
		p.DecisionNote = &r.Note
	}
	return s.decide(ctx, p, "approve")
}

// Reject rejects a pending action for good; the reason is required.
func (s *Service) Reject(ctx context.Context, r DecideRequest) (DriveResult, error) {
	note := strings.TrimSpace(r.Note)
	if note == "" {
		return DriveResult{}, Errorf(CodeInvalidRequest, "note: a reason is required to reject")
	}
	now := s.Now()
	raw, _ := json.Marshal(map[string]string{"note": note})
	return s.decide(ctx, ActionTransitionParams{
		ID: r.ID, From: []State{StatePending}, To: StateRejected, Now: now, Unexpired: true,
		DecidedBy: &r.By, DecidedAt: &now, DecisionNote: &note, FinishedAt: &now,
		Event: Event{ActionID: r.ID, Kind: EventRejected, Actor: r.By, Channel: "dashboard", At: now, Data: raw},
	}, "reject")
}

func (s *Service) decide(ctx context.Context, p ActionTransitionParams, verb string) (DriveResult, error) {
	got, err := s.store.ActionTransition(ctx, p)
	if !errors.Is(err, ErrStateMismatch) {
		return DriveResult{Action: got}, err
	}
	if got.State == StatePending { // past expires_at, not yet swept
		if exp, err := s.expireOne(ctx, got, StatePending); err == nil {
			got = exp
		}
	}
	sameUser := got.DecidedBy != nil && *got.DecidedBy == *p.DecidedBy
	switch {
	case verb == "reject" && got.State == StateRejected && sameUser,
		verb == "approve" && sameUser && got.State != StateRejected && got.State != StateCancelled && got.ApprovedPayload != nil:
		return DriveResult{Action: got, Replayed: true}, nil
	}
	by := "system"
	if got.DecidedBy != nil {
		by = *got.DecidedBy
	}
	return DriveResult{}, &Error{Code: CodeAlreadyDecided, Action: got,
		Detail: fmt.Sprintf("action %s is %s: decided by %s at %s", got.ID, got.State, by, fmtTime(got.DecidedAt))}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Expired []*Action
	Tickets []*Ticket
}

// Sweep expires what is due and opens a stale ticket for every claim held
// longer than its tool's claim_timeout. It never releases a claim.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now := s.Now()
	const batch = 500
	for {
		exp, err := s.store.ActionExpireDue(ctx, now, batch)
		if err != nil {
			return res, err
		}
		res.Expired = append(res.Expired, exp...)
		if len(exp) < batch {
			break
		}
	}
	for {
		tk, err := s.store.TicketOpenStale(ctx, now, batch)
		if err != nil {
			return res, err
		}
		res.Tickets = append(res.Tickets, tk...)
		if len(tk) < batch {
			break
		}
	}
	return res, nil
}

// ResolveRequest is an operator's finding on a ticket.
type ResolveRequest struct {
	TicketID string
	By       string // user:EMAIL
	Outcome  State  // done or failed
	Result   json.RawMessage
	Note     string
}

// ResolveTicket records an operator's finding. For a stale ticket the
// action moves to the outcome; a conflict ticket changes no state.
func (s *Service) ResolveTicket(ctx context.Context, r ResolveRequest) (*Action, *Ticket, error) {
	if strings.TrimSpace(string(r.Result)) == "" {
		r.Result = nil // no result given: not an empty, invalid JSON document
	}
	note := strings.TrimSpace(r.Note)
	if err := checkResolution(r.Outcome, note, r.Result); err != nil {
		// A ticket that is no longer open answers 409 whatever the form
		// said: the operator needs to know someone else resolved it.
		if t, terr := s.store.TicketGetByID(ctx, r.TicketID); terr == nil && t.State != TicketOpen {
			a, _ := s.store.ActionGetByID(ctx, t.ActionID)
			return a, t, ticketResolved(a, t)
		}
		return nil, nil, err
	}
	a, t, err := s.store.TicketResolve(ctx, TicketResolveParams{TicketID: r.TicketID, Now: s.Now(), By: r.By,
		Outcome: r.Outcome, Result: r.Result, Note: note})
	if errors.Is(err, ErrTicketNotOpen) {
		return a, t, ticketResolved(a, t)
	}
	return a, t, err
}

func checkResolution(outcome State, note string, result json.RawMessage) error {
	if outcome != StateDone && outcome != StateFailed {
		return Errorf(CodeInvalidRequest, "outcome must be done or failed")
	}
	if note == "" {
		return Errorf(CodeInvalidRequest, "note: say what you checked in the external system")
	}
	if len(result) > 0 {
		if _, ok := decodeValue(result); !ok {
			return Errorf(CodeInvalidRequest, "result must be JSON")
		}
	}
	return nil
}

func ticketResolved(a *Action, t *Ticket) error {
	by := "someone"
	if t.ResolvedBy != nil {
		by = *t.ResolvedBy
	}
	return &Error{Code: CodeTicketResolved, Action: a, Detail: fmt.Sprintf("ticket %s was already resolved by %s at %s", t.ID, by, fmtTime(t.ResolvedAt))}
}

// ValidID reports whether s has the layout of the ids NewID makes, so a
// malformed id is "not found" or invalid_request, never a database error.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
