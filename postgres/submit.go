package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// The submission path: the claim-first statements (sql/submit.sql) and
// their batching.

// ActionSubmit implements queue.Store, with the token guard.
func (s *Store) ActionSubmit(ctx context.Context, p queue.ActionSubmitParams) (queue.ActionSubmitResult, error) {
	a, ev, tokenHash := p.Action, p.Event, p.TokenHash
	var guard *string
	if tokenHash != "" {
		guard = &tokenHash
	}
	if a.Class != classify.AtLeastOnce && p.PlanStep == nil && s.hint.has(a.IntentKey) {
		got, err := s.lookupReplay(ctx, a, ev, guard)
		if err == nil {
			s.found.Add(1)
			return queue.ActionSubmitResult{Holder: got.action, ReplayRecorded: got.replayWritten}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return queue.ActionSubmitResult{}, fmt.Errorf("submit %s: %w", a.IntentKey, err)
		}
		// Released since, or the token guard refused: claim as always.
		s.missed.Add(1)
		s.hint.forget(a.IntentKey)
	}
	spec, err := json.Marshal(a.Spec)
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("encode tool snapshot: %w", err)
	}
	warn := "[]" // most submissions have no warnings
	if len(a.Warnings) > 0 {
		b, _ := json.Marshal(a.Warnings)
		warn = string(b)
	}
	in := submitInput{a: a, spec: string(spec), warnings: warn, ev: ev, tokenHash: guard, extras: submitExtras(a, p)}
	if p.PlanStep != nil {
		return s.planSubmit(ctx, p, in)
	}
	// The first try goes through the batcher, sorted by intent key (the lock
	// a submission takes); retries after a lost race run on their own.
	for try := range 10 {
		var (
			v   any
			err error
		)
		switch {
		case try == 0:
			v, err = s.batch.call(ctx, &batchCall{kind: submissions{}, arg: in, order: "submit:" + a.IntentKey,
				statement: in.statement, scan: scanSubmitted})
		case in.extras.grantTry:
			// The tool has active grants: queue.PickGrant judges them.
			err = s.withTx(ctx, func(tx pgx.Tx) error {
				in, err := pickGrant(ctx, tx, p, in)
				if err != nil {
					return err
				}
				v, err = scanSubmitted(tx.QueryRow(ctx, submitSQL, in.args()...))
				return err
			})
		default:
			v, err = scanSubmitted(s.pool.QueryRow(ctx, submitSQL, in.args()...))
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// The token guard refused, or this lost a race with a holder its
			// snapshot cannot see, or with one released a moment ago, or
			// the tool has active grants to judge. A submission a grant may
			// approve tries again at once, with the grants judged: its
			// statement checks the token again, and a refusal then is looked
			// up.
			if guard != nil && (try > 0 || !in.extras.grantTry) {
				if _, terr := s.TokenGetByHash(ctx, tokenHash); errors.Is(terr, accounts.ErrNotFound) {
					return queue.ActionSubmitResult{}, queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
				} else if terr != nil {
					return queue.ActionSubmitResult{}, fmt.Errorf("submit %s: check token: %w", a.IntentKey, terr)
				}
			}
			continue
		}
		if err != nil {
			return queue.ActionSubmitResult{}, fmt.Errorf("submit %s: %w", a.IntentKey, err)
		}
		got := v.(submitted)
		if !got.created && !got.action.HoldsIntent() {
			// Not a holder: the latest attempt, with its open conflict ticket.
			return queue.ActionSubmitResult{Holder: got.action, UnderReview: true}, nil
		}
		if got.created {
			a.Attempt = got.action.Attempt
		}
		if got.action.HoldsIntent() {
			s.hint.add(a.IntentKey)
		}
		return queue.ActionSubmitResult{Holder: got.action, Created: got.created, ReplayRecorded: got.replayWritten}, nil
	}
	return queue.ActionSubmitResult{}, fmt.Errorf("submit %s: intent changed hands too often; try again", a.IntentKey)
}

// lookupInput is one submission's part of replayLookupSQL.
type lookupInput struct {
	key, tool, payload, actor, channel string
	at                                 time.Time
	tokenHash                          *string
}

func (in lookupInput) args() []any {
	return []any{[]string{in.key}, []string{in.tool}, []string{in.payload}, []string{in.actor},
		[]string{in.channel}, []time.Time{in.at}, []*string{in.tokenHash}}
}

// replayLookups merges the replay lookups of a batch.
type replayLookups struct{}

func (replayLookups) merge(calls []*batchCall) (string, []any) {
	n := len(calls)
	keys, tools, payloads, actors, channels := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats, tokens := make([]time.Time, n), make([]*string, n)
	for i, c := range calls {
		in := c.arg.(lookupInput)
		keys[i], tools[i], payloads[i], actors[i], channels[i], ats[i], tokens[i] = in.key, in.tool, in.payload, in.actor, in.channel, in.at, in.tokenHash
	}
	return replayLookupManySQL, []any{keys, tools, payloads, actors, channels, ats, tokens}
}

// lookupReplay runs replayLookupSQL for one submission; pgx.ErrNoRows
// means it found no holder it may show.
func (s *Store) lookupReplay(ctx context.Context, a *queue.Action, ev queue.Event, guard *string) (submitted, error) {
	in := lookupInput{key: a.IntentKey, tool: a.Tool, payload: string(a.Payload), actor: ev.Actor,
		channel: a.Channel, at: a.CreatedAt, tokenHash: guard}
	// It writes nothing but the replay's record, so it commits lazily.
	v, err := s.batch.call(ctx, &batchCall{kind: replayLookups{}, arg: in, order: "submit:" + a.IntentKey, lazy: true,
		sql: replayLookupOneSQL, args: in.args(), scan: scanSubmitted})
	if err != nil {
		return submitted{}, err
	}
	return v.(submitted), nil
}

// submitInput is one submission's part of submitManySQL.
type submitInput struct {
	a              *queue.Action
	spec, warnings string
	ev             queue.Event
	tokenHash      *string // nil: no token check
	extras         submitExtra
}

// statement is the submission as a statement of its own.
func (in submitInput) statement() (string, []any) { return submitSQL, in.args() }

// args are the submission's arguments of submitSQL.
func (in submitInput) args() []any {
	a, ev, sub := in.a, in.ev, in.extras
	return []any{a.ID, a.Tool, string(a.Class), a.IntentKey,
		string(a.State), string(a.Payload), a.RequestedBy, a.Channel, a.CreatedAt, a.ClaimedAt,
		a.ClaimedBy, a.ClaimDeadline(), a.ExpiresAt, a.ServerExecuted(), in.spec, in.warnings,
		ev.Kind, ev.Actor, jsonArg(ev.Data), a.FinishedAt, in.tokenHash, ev.Unrouted,
		a.DecidedBy, a.DecidedAt, a.DecisionNote, jsonArg(a.ApprovedPayload), sub.approvals,
		sub.decKind, sub.decActor, sub.decData, sub.decUnrouted,
		sub.grantTry, sub.grantID, sub.decChannel}
}

// submitExtra is what a submission adds to the claim for policies and
// grants: the approvals of a rule's approval, the rule's decision event
// (or the approved event of the grant grantID), and whether a grant may
// approve it, not picked yet (queue.GrantTry).
type submitExtra struct {
	approvals                  string
	decKind, decActor, decData *string
	decChannel                 *string
	decUnrouted                bool
	grantTry                   bool
	grantID                    *string
}

func submitExtras(a *queue.Action, p queue.ActionSubmitParams) submitExtra {
	x := submitExtra{approvals: queue.ApprovalsJSON(a.Approvals)}
	if d := p.Decision; d != nil {
		kind, actor, channel := d.Kind, d.Actor, d.Channel
		x.decKind, x.decActor, x.decChannel, x.decUnrouted = &kind, &actor, &channel, d.Unrouted
		if d.Data != nil {
			data := string(d.Data)
			x.decData = &data
		}
	}
	x.grantTry = p.Grant != nil && a.State == queue.StatePending
	if a.GrantID != "" {
		id := a.GrantID
		x.grantID = &id
	}
	return x
}

// pickGrant is in with the grant that approves it, in tx, when its
// submission asks for one (queue.GrantTry): it reads the tool's active
// grants with their granting users, lets queue.PickGrant choose, locks the
// grant and reads it again (one with a limit FOR UPDATE: grantLockSQL; one
// without FOR SHARE, so that a revocation committing meanwhile is seen:
// grantShareSQL), chooses again without it should it no longer be active,
// and submits what queue.ApproveByGrant makes. No grant approving it, in is
// submitted pending, as given. Either way its statement no longer looks for
// grants.
func pickGrant(ctx context.Context, tx pgx.Tx, p queue.ActionSubmitParams, in submitInput) (submitInput, error) {
	if !in.extras.grantTry {
		return in, nil
	}
	in.extras.grantTry = false
	a, try := in.a, p.Grant
	fp := queue.GrantFindParams{Tool: a.Tool, RequestedBy: a.RequestedBy, Payload: a.Payload, Now: try.Now, Approval: a.Spec.Approval}
	cands, err := grantCandidates(ctx, tx, fp)
	if err != nil {
		return in, fmt.Errorf("grants: %w", err)
	}
	for {
		g, err := queue.PickGrant(cands, fp)
		if err != nil || g == nil {
			return in, err
		}
		lock := grantShareSQL
		if g.MaxUses > 0 {
			lock = grantLockSQL
		}
		locked, err := scanGrant(tx.QueryRow(ctx, lock, g.ID))
		if err != nil {
			return in, fmt.Errorf("lock grant %s: %w", g.ID, err)
		}
		if !locked.Active(try.Now) {
			cands = slices.DeleteFunc(cands, func(c queue.GrantCandidate) bool { return c.Grant.ID == g.ID })
			continue
		}
		g = locked
		approved := *a
		ev := in.ev
		dec := queue.ApproveByGrant(&approved, &ev, g, try)
		in.a, in.ev = &approved, ev
		in.extras = submitExtras(&approved, queue.ActionSubmitParams{Decision: &dec})
		return in, nil
	}
}

// submissions merges the submissions of a batch.
type submissions struct{}

func (submissions) merge(calls []*batchCall) (string, []any) {
	n := len(calls)
	// Five allocations for the 33 columns: a batch is merged for every few
	// requests.
	str, strp, times := cutter[string]{make([]string, 13*n), n}, cutter[*string]{make([]*string, 10*n), n}, cutter[*time.Time]{make([]*time.Time, 5*n), n}
	bools, createdAt := cutter[bool]{make([]bool, 4*n), n}, make([]time.Time, n)
	var (
		ids, tools, classes, keys, states, payloads               = str.next(), str.next(), str.next(), str.next(), str.next(), str.next()
		requestedBy, channels, specs, warnings, evKinds, evActors = str.next(), str.next(), str.next(), str.next(), str.next(), str.next()
		approvals                                                 = str.next()
		claimedBy, evData, tokens                                 = strp.next(), strp.next(), strp.next()
		decidedBy, notes, approvedPayloads                        = strp.next(), strp.next(), strp.next()
		decKinds, decActors, decData, decChannels                 = strp.next(), strp.next(), strp.next(), strp.next()
		claimedAt, deadlines, expiresAt, finishedAt               = times.next(), times.next(), times.next(), times.next()
		decidedAt                                                 = times.next()
		webhooks, unrouted, decUnrouted, grantTry                 = bools.next(), bools.next(), bools.next(), bools.next()
	)
	for i, c := range calls {
		in := c.arg.(submitInput)
		a := in.a
		ids[i], tools[i], classes[i], keys[i], states[i], payloads[i] = a.ID, a.Tool, string(a.Class), a.IntentKey, string(a.State), string(a.Payload)
		requestedBy[i], channels[i], specs[i], warnings[i], evKinds[i], evActors[i] = a.RequestedBy, a.Channel, in.spec, in.warnings, in.ev.Kind, in.ev.Actor
		claimedBy[i], createdAt[i], claimedAt[i], deadlines[i], expiresAt[i], finishedAt[i] = a.ClaimedBy, a.CreatedAt, a.ClaimedAt, a.ClaimDeadline(), a.ExpiresAt, a.FinishedAt
		webhooks[i], unrouted[i] = a.ServerExecuted(), in.ev.Unrouted
		tokens[i] = in.tokenHash
		if in.ev.Data != nil {
			d := string(in.ev.Data)
			evData[i] = &d
		}
		x := in.extras
		decidedBy[i], decidedAt[i], notes[i], approvals[i] = a.DecidedBy, a.DecidedAt, a.DecisionNote, x.approvals
		if a.ApprovedPayload != nil {
			ap := string(a.ApprovedPayload)
			approvedPayloads[i] = &ap
		}
		decKinds[i], decActors[i], decData[i], decChannels[i], decUnrouted[i] = x.decKind, x.decActor, x.decData, x.decChannel, x.decUnrouted
		grantTry[i] = x.grantTry
	}
	return submitManySQL, []any{uuidArray(ids), tools, classes, keys, states, payloads, requestedBy, channels,
		createdAt, claimedAt, claimedBy, deadlines, expiresAt, webhooks, specs, warnings, evKinds,
		evActors, evData, finishedAt, tokens, unrouted, decidedBy, decidedAt, notes, approvedPayloads,
		approvals, decKinds, decActors, decData, decUnrouted, grantTry, decChannels}
}

// submitted is what submitSQL returns: the holder of the intent and whether
// this submission created it.
type submitted struct {
	action                 *queue.Action
	created, replayWritten bool
}

func scanSubmitted(row pgx.Row) (any, error) {
	var created, replayWritten bool
	a, err := scanAction(row, &created, &replayWritten)
	if err != nil {
		return nil, err
	}
	return submitted{a, created, replayWritten}, nil
}

// cutter hands out columns of n rows from one allocation.
type cutter[T any] struct {
	all []T
	n   int
}

func (c *cutter[T]) next() []T {
	col := c.all[:c.n:c.n]
	c.all = c.all[c.n:]
	return col
}
