package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/tracing"
)

// SubmitRequest is one submission by an agent.
type SubmitRequest struct {
	Tool      string
	Payload   json.RawMessage // a JSON object
	IntentKey string          // optional when the tool has a template
	Agent     string          // token name
	Channel   string          // "api" or "mcp"
	// TokenHash, when set, asks the store to check in the claiming
	// statement that an active agent token has this hash
	// (Store.SupportsTokenGuard): the caller took Agent from a cache, not
	// from the database. Only for a store whose SupportsTokenGuard is true.
	TokenHash string
	// Plan, when set, names an approved plan this submission is a step of
	// (plan.go): it is let through only if it equals an unused step.
	Plan string
}

type tokenGuardKey struct{}

// WithTokenGuard returns ctx carrying the hash of the calling agent's token,
// for a caller that took the agent's name from a cache rather than from the
// database: Execute, Complete, Fail and Cancel then move the action only if
// an active token has this hash when their statement runs, and otherwise
// answer CodeUnauthorized whatever the action's state (a replay too). Only
// those four read it, so a transition made for the caller (an upstream
// call's outcome, say) is never refused for a token revoked meanwhile.
// Only for a store whose SupportsTokenGuard is true.
func WithTokenGuard(ctx context.Context, tokenHash string) context.Context {
	return context.WithValue(ctx, tokenGuardKey{}, tokenHash)
}

// TokenGuard is the token hash WithTokenGuard put in ctx, or "".
func TokenGuard(ctx context.Context) string {
	hash, _ := ctx.Value(tokenGuardKey{}).(string)
	return hash
}

// driveGuard is the token hash WithTokenGuard put in ctx, if any.
func (s *Service) driveGuard(ctx context.Context) (string, error) {
	hash := TokenGuard(ctx)
	if hash != "" && !s.store.SupportsTokenGuard() {
		return "", errors.New("this store cannot check agent tokens in its statements; look the token up instead")
	}
	return hash, nil
}

// SubmitResult says what a submission did.
type SubmitResult struct {
	Action   *Action
	Created  bool // a new action: 201
	Replayed bool // the stored action of the held intent: 200
}

// Submit runs the checks in their documented order (payload, key, then the
// held action of the intent) and claims the intent in one statement.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	ctx, span := tracing.Start(ctx, "approvals.submit")
	tool, registered := s.Registry().Lookup(req.Tool)
	res, err := s.submit(ctx, req, tool, registered)
	if s.opts.OnSubmit != nil || span.IsRecording() {
		outcome := "created"
		switch {
		case err != nil && ErrorCode(err) != "":
			outcome = string(ErrorCode(err))
		case err != nil:
			outcome = "error"
		case res.Replayed:
			outcome = "replayed"
		}
		if s.opts.OnSubmit != nil {
			s.opts.OnSubmit(tool.Class, outcome)
		}
		if span.IsRecording() {
			if id := tracing.ToolCallID(ctx); id != "" {
				span.SetAttributes(attribute.String("gen_ai.tool.call.id", id))
			}
			traceSubmission(span, req, tool, res, outcome)
		}
	}
	endSpan(span, err)
	return res, err
}

// traceSubmission names on span what the submission was and what came of
// it: the tool, its class, the intent, the outcome and what decided (the
// policy rule or the grant), never the payload.
func traceSubmission(span trace.Span, req SubmitRequest, tool classify.Tool, res SubmitResult, outcome string) {
	span.SetAttributes(attribute.String("gen_ai.tool.name", req.Tool),
		attribute.String("approvals.tool.class", string(tool.Class)),
		attribute.String("approvals.channel", req.Channel),
		attribute.String("approvals.outcome", outcome))
	a := res.Action
	if a == nil {
		if req.IntentKey != "" {
			span.SetAttributes(attribute.String("approvals.intent_key", req.IntentKey))
		}
		return
	}
	span.SetAttributes(actionAttrs(a)...)
	span.SetAttributes(attribute.String("approvals.state", string(a.State)))
	switch {
	case a.GrantID != "":
		span.SetAttributes(attribute.String("approvals.decided_by", "grant"), attribute.String("approvals.grant.id", a.GrantID))
	case a.DecidedBy != nil && strings.HasPrefix(*a.DecidedBy, PolicyActorPrefix):
		span.SetAttributes(attribute.String("approvals.decided_by", "policy"),
			attribute.String("approvals.policy.rule", strings.TrimPrefix(*a.DecidedBy, PolicyActorPrefix)))
	}
}

// submission is a submission through its checks: the new action as it
// would be stored, routed by the tool's policy and class, and its events.
type submission struct {
	a        *Action
	ev       Event
	decision *Event    // a policy rule's decision, if one decided
	grant    *GrantTry // a grant may approve it (it waits for a person and the tool takes grants)
	verdict  classify.Verdict
	// held is the action that holds the intent, when the checks read it
	// (an upstream tool that cannot be called now).
	held *Action
	// plan is the plan step the new action uses (SubmitRequest.Plan).
	plan *PlanStepClaim
}

// routed reports whether a channel hears of an event the submission
// writes: its submitted event, a rule's decision or a grant's approval.
func (sub *submission) routed() bool {
	return !sub.ev.Unrouted || sub.decision != nil && !sub.decision.Unrouted ||
		sub.grant != nil && !sub.grant.ApprovedUnrouted
}

// prepare runs the checks of a submission in their documented order
// (payload, key, the tool's upstream) and builds the action its policy and
// class make of it. It writes nothing: Submit stores what it returns, and
// DryRun only reads.
func (s *Service) prepare(ctx context.Context, req SubmitRequest, tool classify.Tool, registered bool) (*submission, error) {
	if req.Tool == "" {
		return nil, Errorf(CodeInvalidRequest, "tool is required")
	}
	notReady := s.upstreamReady(tool)
	var (
		derived string
		payload map[string]any
	)
	if len(tool.Schema) == 0 && tool.Intent == "" && !tool.HasPolicy() {
		// Nothing reads the payload's value: checking it is one JSON
		// object spares decoding it (a tenth of a replay's server time).
		if !isJSONObject(req.Payload) {
			return nil, Errorf(CodeInvalidRequest, "payload must be a JSON object")
		}
	} else {
		var err error
		if payload, err = DecodeObject(req.Payload); err != nil {
			return nil, Errorf(CodeInvalidRequest, "payload must be a JSON object")
		}
		if err := tool.Validate(payload); err != nil {
			return nil, payloadError(err)
		}
		if derived, err = tool.DeriveKey(payload); err != nil {
			return nil, payloadError(err)
		}
	}
	var warnings []string
	key := req.IntentKey
	switch {
	case derived != "":
		if key != "" && key != derived {
			return nil, Errorf(CodeIntentKeyMismatch,
				"intent_key %q differs from %q, the key derived from the payload by the template %q of tool %s", key, derived, tool.Intent, tool.Name)
		}
		key = derived
	case key == "" && tool.Class != classify.AtLeastOnce:
		if !registered {
			return nil, Errorf(CodeIntentKeyRequired, "tool %s is not registered, so it is at-most-once and needs an explicit intent_key (or Idempotency-Key header) naming the business intent", req.Tool)
		}
		return nil, Errorf(CodeIntentKeyRequired, "tool %s has no intent template: supply intent_key (or the Idempotency-Key header) naming the business intent, e.g. email:{customer_id}:{topic}", req.Tool)
	default:
		if key != "" {
			if err := ValidIntentKey(key, "intent_key"); err != nil {
				return nil, err
			}
			if classify.LooksRandom(key) {
				warnings = append(warnings, "intent_key_looks_random")
			}
		}
	}
	sub := &submission{}
	if notReady != nil {
		// Refused only when nothing holds the intent: a retry of an
		// intent whose call is in progress, done or pending gets the usual
		// answer (409 in_progress, the replay), never "nothing was done".
		held, err := s.heldAction(ctx, tool, key)
		if err != nil || held == nil {
			return nil, notReady
		}
		sub.held = held
	}
	if !registered {
		warnings = append(warnings, WarningToolNotRegistered)
	}
	if HasInvisibleCharacters(req.Payload) {
		warnings = append(warnings, WarningInvisibleCharacters)
	}

	now := s.Now()
	verdict, err := s.evaluatePolicy(ctx, tool, payload, req, key, now)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, policyWarnings(verdict)...)
	agent := "agent:" + req.Agent
	channel := req.Channel
	if channel == "" {
		channel = "api"
	}
	a := &Action{
		ID: NewID(now), Tool: req.Tool, Class: tool.Class, IntentKey: key, Attempt: 1,
		Payload: req.Payload, RequestedBy: agent, CreatedAt: now, Warnings: warnings,
		ApprovalsRequired: tool.Approval.RequiredApprovals(), Approvals: []Approval{},
		Spec: tool, Channel: channel,
	}
	// The snapshot keeps the rule that decided, never the policy itself:
	// later changes of the file affect new submissions only.
	if a.Spec.Approval != nil {
		ap := *a.Spec.Approval
		ap.Policy, ap.Grants = nil, nil
		a.Spec.Approval = &ap
	}
	sub.a, sub.verdict = a, verdict
	sub.decision = s.routeAtSubmission(a, tool, verdict, now)
	sub.ev = Event{Kind: EventSubmitted, Actor: agent, Channel: channel, At: now}
	tp := tracing.Traceparent(ctx)
	if len(verdict.Errors) > 0 || tp != "" {
		data := map[string]any{}
		if len(verdict.Errors) > 0 {
			// What went wrong, for the staff who read the timeline.
			data["policy_errors"] = verdict.Errors
		}
		if tp != "" {
			data[traceparentField] = tp
		}
		sub.ev.Data, _ = json.Marshal(data)
	}
	sub.ev.Unrouted = s.unrouted(sub.ev, a)
	// A grant approves only what no rule decided, evaluated fully, with
	// nothing a person must see first.
	if a.State == StatePending && verdict.Rule == nil && verdict.Failed == nil && len(UnseenRisks(warnings)) == 0 && tool.GrantsApply() {
		sub.grant = &GrantTry{Now: now, ExpiresAt: now.Add(tool.ExpiresAfter),
			ApprovedUnrouted: s.unrouted(Event{Kind: EventApproved}, a)}
	}
	return sub, nil
}

// claimedUpstream reports whether the new action a is one approvals calls
// upstream within its submission: claimed (exactly-once) or recorded
// (at-least-once), on a tool with an upstream.
func claimedUpstream(a *Action) bool {
	return a.Spec.Upstream != "" && (a.State == StateInProgress || a.State == StateRecorded)
}

func (s *Service) submit(ctx context.Context, req SubmitRequest, tool classify.Tool, registered bool) (SubmitResult, error) {
	sub, err := s.prepare(ctx, req, tool, registered)
	if err != nil {
		return SubmitResult{}, err
	}
	if req.Plan != "" {
		claim, replay, err := s.applyPlan(ctx, req, sub)
		if err != nil {
			return SubmitResult{}, err
		}
		if replay != nil {
			return s.answerHeld(ctx, req, sub.a, replay, false)
		}
		sub.plan = claim
	}
	a, ev := sub.a, sub.ev
	key := a.IntentKey
	if claimedUpstream(a) {
		// The call happens within the submission: take its slot before
		// anything is stored, so a refusal has done nothing.
		release, err := s.acquireUpstreamCall(tool.Name)
		if err != nil {
			return SubmitResult{}, err
		}
		defer release()
	}
	if req.TokenHash != "" && !s.store.SupportsTokenGuard() {
		return SubmitResult{}, errors.New("submit: this store cannot check agent tokens in the submission")
	}
	// An at-least-once upstream call's start goes on record with the
	// action, in the submission's own commit, not in one of its own before
	// the call: durable before the call either way, one commit fewer. Such
	// a tool takes no policy, so the statement's second event is free.
	startRecorded := claimedUpstream(a) && a.State == StateRecorded && sub.decision == nil
	if startRecorded {
		sub.decision = s.upstreamStart(a)
	}
	stored, err := s.store.ActionSubmit(ctx, ActionSubmitParams{Action: a, Event: ev, Decision: sub.decision, Grant: sub.grant, TokenHash: req.TokenHash, PlanStep: sub.plan})
	if err != nil {
		return SubmitResult{}, err
	}
	if stored.PlanStepRefused {
		used, err := s.planRefused(ctx, req, a)
		if err != nil {
			return SubmitResult{}, err
		}
		return s.answerHeld(ctx, req, a, used, false)
	}
	holder, replayRecorded := stored.Holder, stored.ReplayRecorded
	if stored.UnderReview {
		return SubmitResult{}, underReview(holder, key)
	}
	if stored.Created {
		if r := sub.verdict.Rule; r != nil && s.opts.OnPolicy != nil {
			s.opts.OnPolicy(tool.Name, r.Name, string(r.Decide))
		}
		if holder.GrantID != "" && s.opts.OnPolicy != nil {
			s.opts.OnPolicy(tool.Name, "", "grant")
		}
		if s.opts.OnEvents != nil && sub.routed() {
			s.opts.OnEvents()
		}
		if holder.State == StateApproved && holder.ServerExecuted() {
			s.approvedAtSubmission.Publish(Change{ActionID: holder.ID, State: StateApproved})
		}
		if claimedUpstream(holder) {
			holder = s.callUpstreamNow(ctx, holder, startRecorded)
		}
		return SubmitResult{Action: holder, Created: true}, nil
	}
	return s.answerHeld(ctx, req, a, holder, replayRecorded)
}

// answerHeld answers a submission whose intent holder is holder: a replay
// (200), or a refusal when the holder has another tool or payload or is
// an exactly-once claim mid-flight, with its event (unless the store
// recorded it: replayRecorded).
func (s *Service) answerHeld(ctx context.Context, req SubmitRequest, a *Action, holder *Action, replayRecorded bool) (SubmitResult, error) {
	agent, channel, key, now := a.RequestedBy, a.Channel, a.IntentKey, a.CreatedAt
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
			s.log.WarnContext(ctx, "could not record event", "kind", kind, "action", holder.ID, "err", err)
		}
	}
	switch kind {
	case EventReused:
		return SubmitResult{}, reused(holder, req.Tool, key)
	case EventInProgressSeen:
		return SubmitResult{}, inProgressHeld(holder, key)
	}
	return SubmitResult{Action: holder, Replayed: true}, nil
}

// reused is the refusal of a submission whose intent holder has another
// tool or payload.
func reused(holder *Action, tool, key string) error {
	what := "payload"
	if holder.Tool != tool {
		what = "tool (" + holder.Tool + ")"
	}
	return &Error{Code: CodeIntentKeyReused, Action: holder,
		Detail: fmt.Sprintf("this call did nothing new: intent %q is already held by action %s (state %s) with a different %s", key, holder.ID, holder.State, what)}
}

// inProgressHeld is the refusal of a submission whose intent holder is an
// exactly-once claim mid-flight.
func inProgressHeld(holder *Action, key string) error {
	return &Error{Code: CodeInProgress, Action: holder,
		Detail: fmt.Sprintf("action %s for intent %q is in progress: do not act; read it later", holder.ID, key)}
}

// underReview is the refusal of a submission whose intent's latest
// attempt has an open conflict ticket: its effect may have happened, so a
// new attempt could do it again.
func underReview(latest *Action, key string) error {
	ticket := "?"
	if latest.Ticket != nil {
		ticket = latest.Ticket.ID
	}
	return &Error{Code: CodeIntentUnderReview, Action: latest,
		Detail: fmt.Sprintf("intent %q is under review: conflict ticket %s is open on action %s (%s), whose effect may have happened; this call did nothing", key, ticket, latest.ID, latest.State)}
}

// payloadError is the refusal of a payload the tool's schema or intent
// template refuses: invalid_payload, except for a rendered key with an
// invisible character, which is invalid_request as a supplied one is.
func payloadError(err error) error {
	var pe *classify.PayloadError
	var invisible *classify.InvisibleKeyError
	if errors.As(err, &invisible) {
		return Errorf(CodeInvalidRequest, "%v", err)
	}
	if errors.As(err, &pe) {
		return Errorf(CodeInvalidPayload, "%s", pe.Error())
	}
	return Errorf(CodeInvalidPayload, "%v", err)
}

// heldAction returns the action that holds key (Action.HoldsIntent), read
// through the stores' holder index, or nil.
func (s *Service) heldAction(ctx context.Context, tool classify.Tool, key string) (*Action, error) {
	if tool.Class == classify.AtLeastOnce || key == "" {
		return nil, nil
	}
	list, err := s.store.ActionList(ctx, ActionListParams{IntentKey: key, Held: true, Limit: 1})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list[0], nil
}
