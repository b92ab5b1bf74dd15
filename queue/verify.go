package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/tracing"
)

// Verifiers (docs/verifiers.md): an unknown outcome is settled by asking
// the system that would have performed the effect. The Service asks
// through a VerifyAsker (an adapter beside the executors: a signed webhook
// or an upstream MCP tool), judges the answer with the tool's expressions,
// seals the evidence in the action's timeline (event verified) and applies
// the tool's resolve mode through the one rule of resolving a ticket.

// EventVerified is one check of a verifier, with its verdict and evidence.
const EventVerified = "verified"

// ChannelVerifier is the channel of what a verifier does.
const ChannelVerifier = "verifier"

// VerifyAgentInterval is how often an agent may ask about one action.
const VerifyAgentInterval = 10 * time.Second

// MaxVerifyAnswer caps the answer an event keeps as evidence.
const MaxVerifyAnswer = 64 << 10

// VerifyAsker asks a tool's system of record. Ask returns the answer's
// body (a webhook's 2xx body, an upstream tool's structured result); any
// other status, a timeout, or no answer is an error saying why, which
// makes the verdict unknown, with what was said if anything (kept as the
// check's evidence, never judged).
type VerifyAsker interface {
	Ask(ctx context.Context, t classify.Tool, q VerifyQuestion) (json.RawMessage, error)
}

// VerifyQuestion is what a verifier is asked about one action.
type VerifyQuestion struct {
	// Body is the webhook request's body: {"type": "action.verify", "action": {…}}.
	Body json.RawMessage
	// MessageID is the request's own webhook-id.
	MessageID string
	// Payload is the approved payload where there is one, else the
	// submitted one, decoded: an upstream verifier's argument templates
	// are filled from it.
	Payload map[string]any
	Action  *Action
}

// VerifyCheck is the verdict of one check, as the API answers it.
type VerifyCheck struct {
	Verdict   string    `json:"verdict"`
	Reason    string    `json:"reason"`
	CheckedAt time.Time `json:"checked_at"`
	Action    *Action   `json:"action"`
}

// VerifyRequest asks the verifier about one action now.
type VerifyRequest struct {
	ActionID string
	// By is who asks: the sweep ("system"), an operator's "Check now"
	// (user:EMAIL) or the agent holding the claim (agent:NAME), recorded in
	// the event's data; the event's actor is always verifier:TOOL.
	By string
	// Agent, when set, restricts the check to that agent's own in_progress
	// action (POST /api/v1/actions/{id}/verify).
	Agent string
}

// TicketChecks keep the verifiers' asking schedule: a row per ticket a
// verifier was asked about, its rounds, when the next is due and the latest
// verdict.
type TicketChecks interface {
	// TicketCheckDue claims this round's checks: the open tickets of
	// actions of p.Tools never asked about, or whose verdict is still
	// unknown and whose next round is due at p.Now, at most p.Limit. The
	// claim and the scheduling of the next round (after 1, 2, 4 … minutes,
	// at most hourly) are one statement per ticket (PostgreSQL: the
	// tickets locked FOR UPDATE SKIP LOCKED; SQLite: its one writer), so
	// several processes never claim one round twice. It returns the
	// claimed tickets.
	TicketCheckDue(ctx context.Context, p TicketCheckDueParams) ([]*Ticket, error)
	// TicketCheckRecord appends p.Event (kind verified) and, for a ticket,
	// keeps p.Verdict as its latest verdict, in one transaction.
	TicketCheckRecord(ctx context.Context, p TicketCheckRecordParams) error
	// VerifySlotTake takes the agents' slot to ask the verifier of action
	// p.ActionID at p.Now, if it was never taken or last taken at least
	// p.Interval before p.Now, in one statement (PostgreSQL: a conditional
	// upsert; SQLite: its one writer), so of several asks at once, in one
	// process or several, one takes it. It returns whether the caller took
	// it and when it was last taken (p.Now when taken).
	VerifySlotTake(ctx context.Context, p VerifySlotTakeParams) (VerifySlot, error)
}

// VerifySlotTakeParams take an action's slot for an agent's check.
type VerifySlotTakeParams struct {
	ActionID string
	Now      time.Time
	Interval time.Duration
}

// VerifySlot is the outcome of VerifySlotTake: whether the caller took
// the slot, and when it was last taken (it frees Interval later).
type VerifySlot struct {
	Taken   bool
	AskedAt time.Time
}

// TicketCheck is a ticket's verifier schedule: the sweep's rounds so far,
// when the next is due, and the latest verdict (the sweep asks again only
// while it is unknown).
type TicketCheck struct {
	Checks  int
	NextAt  time.Time
	Verdict string
}

// TicketCheckDueParams select the checks due.
type TicketCheckDueParams struct {
	Now   time.Time
	Tools []string
	Limit int
}

// TicketCheckRecordParams record one check.
type TicketCheckRecordParams struct {
	TicketID string // "" when the action has no open ticket
	Verdict  string
	Event    Event
}

// VerifyNextDelay is how long after round n (1 for the first) the next one
// is due: 1, 2, 4 … minutes, at most an hour. The stores compute the same.
func VerifyNextDelay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	if n > 7 {
		return time.Hour
	}
	return min(time.Duration(1<<(n-1))*time.Minute, time.Hour)
}

// VerifyDue asks the verifiers of every ticket whose round is due, each
// once across processes, and applies what they prove. It returns how many
// it asked.
func (ts Tickets) VerifyDue(ctx context.Context) (int, error) {
	s := ts.s
	reg := s.Registry()
	var tools []string
	for _, t := range reg.Tools() {
		if t.HasVerifier() {
			tools = append(tools, t.Name)
		}
	}
	if len(tools) == 0 || s.opts.Verifier == nil {
		return 0, nil
	}
	const batch = 50
	asked := 0
	for {
		due, err := s.store.TicketCheckDue(ctx, TicketCheckDueParams{Now: s.Now(), Tools: tools, Limit: batch})
		if err != nil {
			return asked, err
		}
		for _, t := range due {
			// The round is a reconciliation span of the action's trace,
			// its check the child.
			rctx, span := ctx, trace.Span(nil)
			if tracing.Enabled() {
				rctx, span = tracing.Start(trace.ContextWithSpan(ctx, trace.SpanFromContext(SubmissionTraceContext(ctx, s.store, t.ActionID))),
					"approvals.reconcile", trace.WithAttributes(attribute.String("approvals.ticket.id", t.ID),
						attribute.String("approvals.ticket.kind", string(t.Kind)), attribute.String("approvals.action.id", t.ActionID)))
			}
			_, err := s.Tickets().Verify(rctx, VerifyRequest{ActionID: t.ActionID, By: "system"})
			if err != nil && ctx.Err() == nil {
				s.log.Warn("verifier check failed", "action", t.ActionID, "ticket", t.ID, "err", err)
			}
			if span != nil {
				endSpan(span, err)
			}
			asked++
		}
		if len(due) < batch {
			return asked, nil
		}
	}
}

// Verify asks the action's verifier now, records the check and applies the
// tool's resolve mode. An answer that proves nothing changes nothing.
func (ts Tickets) Verify(ctx context.Context, r VerifyRequest) (VerifyCheck, error) {
	if !tracing.Enabled() {
		return ts.verify(ctx, r)
	}
	// One check, one span: who asked, the verdict, never the answer.
	ctx, span := tracing.Start(ctx, "approvals.verify", trace.WithAttributes(attribute.String("approvals.action.id", r.ActionID),
		attribute.String("approvals.verify.asked_by", askedByKind(r.By))))
	check, err := ts.verify(ctx, r)
	if a := check.Action; a != nil {
		span.SetAttributes(actionAttrs(a)...)
		span.SetAttributes(attribute.String("approvals.state", string(a.State)))
		if a.Ticket != nil {
			span.SetAttributes(attribute.String("approvals.ticket.id", a.Ticket.ID))
		}
		if sc := ts.s.submissionTrace(ctx, a.ID); sc.IsValid() && sc.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	if check.Verdict != "" {
		span.SetAttributes(attribute.String("approvals.verify.verdict", check.Verdict))
	}
	endSpan(span, err)
	return check, err
}

// askedByKind is who asked for a check, without naming a person: system
// (the sweep), operator or agent.
func askedByKind(by string) string {
	switch {
	case strings.HasPrefix(by, "user:"):
		return "operator"
	case strings.HasPrefix(by, "agent:"):
		return "agent"
	}
	return "system"
}

func (ts Tickets) verify(ctx context.Context, r VerifyRequest) (VerifyCheck, error) {
	s := ts.s
	a, err := s.store.ActionGetByID(ctx, r.ActionID)
	if err != nil {
		return VerifyCheck{}, err
	}
	if r.Agent != "" && a.RequestedBy != r.Agent {
		return VerifyCheck{}, ActionNotFound(r.ActionID)
	}
	tool, _ := s.Registry().Lookup(a.Tool)
	if !tool.HasVerifier() || s.opts.Verifier == nil {
		return VerifyCheck{}, Errorf(CodeNoVerifier, "tool %s has no verifier: nothing can be asked about its actions", a.Tool)
	}
	if r.Agent != "" {
		if a.State != StateInProgress {
			return VerifyCheck{}, &Error{Code: CodeInvalidTransition, Action: a,
				Detail: fmt.Sprintf("action %s is %s: only an in_progress action's outcome is asked about", a.ID, a.State)}
		}
	}
	now := s.Now()
	if r.Agent != "" {
		// Any check (the sweep's, an operator's) counts; the agents' slot
		// is then taken in one statement before asking, so asks at once
		// (the answer takes up to the verifier's timeout) reach it once.
		// A slot taken for an ask that then fails (the database away, the
		// verifier silent) stays taken: it counts as the check and frees
		// after the interval as any other.
		last, ok, err := LatestVerifyCheck(ctx, s.store, a.ID)
		if err != nil {
			return VerifyCheck{}, err
		}
		if ok && now.Sub(last.At) < VerifyAgentInterval {
			return VerifyCheck{}, tooManyChecks(a, last.At, now)
		}
		slot, err := s.store.VerifySlotTake(ctx, VerifySlotTakeParams{ActionID: a.ID, Now: now, Interval: VerifyAgentInterval})
		if err != nil {
			return VerifyCheck{}, fmt.Errorf("take the verifier slot of %s: %w", a.ID, err)
		}
		if !slot.Taken {
			return VerifyCheck{}, tooManyChecks(a, slot.AskedAt, now)
		}
	}
	v := tool.Verify
	out, answer := AskVerifier(ctx, s.opts.Verifier, tool, a, now)
	by := "verifier:" + a.Tool
	data := map[string]any{"verdict": out.Verdict, "reason": out.Reason, "asked_by": r.By,
		"tools_hash": s.Registry().Hash, "resolve": v.Resolve,
		"expressions": map[string]string{"done": v.Done, "not_done": v.NotDone, "result": v.Result}}
	if len(answer) > 0 {
		if len(answer) <= MaxVerifyAnswer && json.Valid(answer) {
			data["answer"] = json.RawMessage(answer)
		} else {
			data["answer_text"] = Excerpt(answer, MaxVerifyAnswer)
			data["answer_cut"] = len(answer) > MaxVerifyAnswer
		}
	}
	if out.Verdict == classify.VerdictDone {
		data["result"] = out.Result
	}
	ticketID := ""
	if a.Ticket != nil && a.Ticket.State == TicketOpen {
		ticketID = a.Ticket.ID
		data["ticket"] = ticketID
	}
	dataJS, err := json.Marshal(data)
	if err != nil {
		return VerifyCheck{}, fmt.Errorf("verify %s: %w", a.ID, err)
	}
	w := checkWrite{a: a, tool: tool, out: out, data: dataJS, ticketID: ticketID, by: by, now: now}
	check, err := s.writeCheck(ctx, &w)
	// A verdict learnt while the database is away is kept and written
	// once it answers (docs/operations.md, "Replication and failover"):
	// the system of record is not asked again for what it already said.
	s.keepUnwritten(ctx, err, a.ID, "verified "+string(out.Verdict), func(ctx context.Context) error {
		_, err := s.writeCheck(ctx, &w)
		return err
	})
	return check, err
}

// tooManyChecks refuses an agent's ask about a whose verifier was asked
// at askedAt, with the Retry-After of when it may ask again.
func tooManyChecks(a *Action, askedAt, now time.Time) *Error {
	wait := min(max(askedAt.Add(VerifyAgentInterval).Sub(now), time.Second), VerifyAgentInterval)
	return &Error{Code: CodeTooManyChecks, Action: a, After: wait,
		Detail: fmt.Sprintf("the verifier of action %s was asked at %s; an agent may ask once every %s", a.ID, fmtTime(&askedAt), VerifyAgentInterval)}
}

// checkWrite is one verifier check to write: its event, then what its
// verdict settles. recorded says the event is written, so a kept write
// tried again does not record the check twice.
type checkWrite struct {
	a        *Action
	tool     classify.Tool
	out      classify.VerifyOutcome
	data     json.RawMessage
	ticketID string
	by       string
	now      time.Time
	recorded bool
}

// writeCheck records the check and settles what its verdict proves.
func (s *Service) writeCheck(ctx context.Context, w *checkWrite) (VerifyCheck, error) {
	a, out, ticketID, by, now, v := w.a, w.out, w.ticketID, w.by, w.now, w.tool.Verify
	if !w.recorded {
		if err := s.store.TicketCheckRecord(ctx, TicketCheckRecordParams{TicketID: ticketID, Verdict: out.Verdict,
			Event: Event{ActionID: a.ID, Kind: EventVerified, Actor: by, Channel: ChannelVerifier, At: now, Data: w.data}}); err != nil {
			return VerifyCheck{}, fmt.Errorf("record the check of %s: %w", a.ID, err)
		}
		w.recorded = true
		if s.opts.OnVerified != nil {
			s.opts.OnVerified(a.Tool, out.Verdict)
		}
	}
	check := VerifyCheck{Verdict: out.Verdict, Reason: out.Reason, CheckedAt: now, Action: a}
	if out.Verdict == classify.VerdictUnknown {
		return check, nil
	}
	outcome := StateDone
	if out.Verdict == classify.VerdictNotDone {
		outcome = StateFailed
	}
	// The answer may have taken its timeout: a report or an operator may
	// have settled the action since it was read, and a proof that
	// contradicts what they stored is a conflict all the same.
	if a.State == StateInProgress {
		fresh, err := s.store.ActionGetByID(ctx, a.ID)
		if err != nil {
			return check, fmt.Errorf("settle %s: %w", a.ID, err)
		}
		a, check.Action = fresh, fresh
	}
	switch {
	case contradicts(a, outcome):
		return check, s.verifiedConflict(ctx, a, outcome, by, now, out)
	case v.Resolve == classify.ResolveAuto && ticketID != "" && a.Ticket != nil && a.Ticket.Kind == TicketStale && a.State == StateInProgress:
		res, err := s.store.TicketResolve(ctx, TicketResolveParams{TicketID: ticketID, Now: now, By: by, Outcome: outcome,
			Result: out.Result, Note: VerifiedNote(out), Channel: ChannelVerifier})
		switch {
		case errors.Is(err, ErrTicketNotOpen):
			// An operator or the agent's late report resolved it first:
			// theirs stands, and a proof against it is a conflict.
			return check, s.verifiedConflictIfContradicted(ctx, res.Action, a.ID, outcome, by, now, out)
		case err != nil:
			return check, fmt.Errorf("resolve ticket %s: %w", ticketID, err)
		default:
			s.ticketResolvedBy(by)
		}
		if res.Action != nil {
			check.Action = res.Action
		}
	case v.Resolve == classify.ResolveAuto && ticketID == "" && a.State == StateInProgress:
		// No ticket yet (the agent asked before the claim went stale): the
		// proof moves the action as the agent's own report would, and
		// resolves a stale ticket opened meanwhile with the verifier's note,
		// as TicketResolve would have.
		p := ActionTransitionParams{ID: a.ID, From: []State{StateInProgress}, To: outcome, Now: now, FinishedAt: &now,
			Event: Event{ActionID: a.ID, Kind: OutcomeEventKind(outcome), Actor: by, Channel: ChannelVerifier, At: now}}
		if outcome == StateDone {
			p.Result, p.Event.Data = out.Result, out.Result
		} else {
			e := "resolved by verifier: " + VerifiedNote(out)
			p.Error = &e
		}
		p.ResolveStale = LateResolution(p.Event, outcome, VerifiedNote(out))
		moved, err := s.store.ActionTransition(ctx, p)
		switch {
		case errors.Is(err, ErrStateMismatch):
			// The agent's report or an operator came first: theirs
			// stands, and a proof against it is a conflict.
			return check, s.verifiedConflictIfContradicted(ctx, moved, a.ID, outcome, by, now, out)
		case err != nil:
			return check, fmt.Errorf("settle %s: %w", a.ID, err)
		default:
			s.noteStaleTicketResolved(p, moved)
		}
		if moved != nil {
			check.Action = moved
		}
	}
	return check, nil
}

// contradicts reports whether a stored outcome of a contradicts a proof of
// outcome.
func contradicts(a *Action, outcome State) bool {
	return a != nil && (a.State == StateDone || a.State == StateFailed) && a.State != outcome
}

// verifiedConflict keeps a proof that contradicts the action's stored
// outcome in its timeline and opens a conflict ticket: a person looks, and
// no state changes.
func (s *Service) verifiedConflict(ctx context.Context, a *Action, outcome State, by string, now time.Time, out classify.VerifyOutcome) error {
	ev := Event{ActionID: a.ID, Kind: EventOutcomeConflict, Actor: by, Channel: ChannelVerifier, At: now,
		Data: mustJSON(map[string]any{"report": outcome, "stored_state": a.State, "reason": out.Reason, "result": out.Result})}
	if _, err := s.store.TicketOpenConflict(ctx, TicketOpenConflictParams{ActionID: a.ID, Now: now, Event: ev}); err != nil {
		return fmt.Errorf("open conflict ticket for %s: %w", a.ID, err)
	}
	return nil
}

// verifiedConflictIfContradicted opens the conflict of a proof of outcome
// when the action, as a lost race left it (a, else read again), stores
// the other outcome.
func (s *Service) verifiedConflictIfContradicted(ctx context.Context, a *Action, actionID string, outcome State, by string, now time.Time, out classify.VerifyOutcome) error {
	if a == nil || a.State == StateInProgress {
		fresh, err := s.store.ActionGetByID(ctx, actionID)
		if err != nil {
			return fmt.Errorf("settle %s: %w", actionID, err)
		}
		a = fresh
	}
	if !contradicts(a, outcome) {
		return nil
	}
	return s.verifiedConflict(ctx, a, outcome, by, now, out)
}

// AskVerifier asks tool's verifier about a through asker and judges the
// answer at now; it writes nothing (approvals verify test uses it alone).
// answer is what the system of record said, if anything.
func AskVerifier(ctx context.Context, asker VerifyAsker, tool classify.Tool, a *Action, now time.Time) (out classify.VerifyOutcome, answer json.RawMessage) {
	v := tool.Verify
	payload := a.ApprovedPayload
	if len(payload) == 0 {
		payload = a.Payload
	}
	var payloadMap map[string]any
	_ = decodeJSONNumbers(payload, &payloadMap)
	fields := map[string]any{"id": a.ID, "tool": a.Tool, "intent_key": a.IntentKey, "attempt": a.Attempt,
		"payload": a.Payload, "approved_payload": a.ApprovedPayload, "claimed_at": a.ClaimedAt}
	if len(a.ApprovedPayload) == 0 {
		fields["approved_payload"] = nil
	}
	body, err := json.Marshal(map[string]any{"type": "action.verify", "action": fields})
	if err != nil {
		return classify.VerifyOutcome{Verdict: classify.VerdictUnknown, Reason: "the question could not be written: " + err.Error()}, nil
	}
	askCtx, cancel := context.WithTimeout(ctx, v.Timeout)
	answer, askErr := asker.Ask(askCtx, tool, VerifyQuestion{Body: body, MessageID: NewID(now), Payload: payloadMap, Action: a})
	cancel()
	if !utf8.Valid(answer) {
		// Bytes that are not UTF-8 (inside a string, in an otherwise
		// readable answer) are what text can hold of them, as an executor's
		// result is (ResultOf): PostgreSQL stores no other text, so the
		// evidence and a result taken from it would never be written.
		answer = json.RawMessage(strings.ToValidUTF8(string(answer), "\uFFFD"))
	}
	var response any
	switch {
	case askErr != nil:
		return classify.VerifyOutcome{Verdict: classify.VerdictUnknown, Reason: "no answer: " + askErr.Error()}, answer
	case decodeJSONNumbers(answer, &response) != nil:
		return classify.VerifyOutcome{Verdict: classify.VerdictUnknown, Reason: "the answer is not JSON"}, answer
	}
	var actionMap map[string]any
	js, _ := json.Marshal(fields)
	_ = decodeJSONNumbers(js, &actionMap)
	var claimed time.Time
	if a.ClaimedAt != nil {
		claimed = *a.ClaimedAt
	}
	return v.Evaluate(&tool, classify.VerifyInput{Response: response, Payload: payloadMap, Action: actionMap,
		ClaimedAt: claimed, Now: now}, answer), answer
}

// VerifiedNote is the note of a ticket resolved by a verifier's proof.
func VerifiedNote(out classify.VerifyOutcome) string {
	return fmt.Sprintf("verified %s by asking the system of record: %s (the answer is in the timeline's verified event)", out.Verdict, out.Reason)
}

// LatestVerifyCheck returns the action's newest verified event, or false.
func LatestVerifyCheck(ctx context.Context, r Reader, actionID string) (Event, bool, error) {
	evs, err := r.EventList(ctx, EventListParams{ActionID: actionID, Kind: EventVerified, Limit: 1})
	if err != nil || len(evs) == 0 {
		return Event{}, false, err
	}
	return evs[0], true, nil
}

// VerifyTools names the tools of reg that have a verifier.
func VerifyTools(reg *classify.Registry) []string {
	var out []string
	for _, t := range reg.Tools() {
		if t.HasVerifier() {
			out = append(out, t.Name)
		}
	}
	return slices.Clip(out)
}

func decodeJSONNumbers(b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
