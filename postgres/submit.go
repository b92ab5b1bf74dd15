package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// The submission path: the claim-first statements and their batching.
//
// Every statement that looks for the holder of an intent key names the
// states that hold one where it says heldStatesMarker; withHeldStates writes
// queue.HeldStates there as literals. Literals, not a parameter: the planner
// matches them against the predicate of the partial unique index
// actions_held_intent, which a parameter under the batches' generic plans
// (see Open) could not be. For the same reason each of them says
// a.class <> 'at-least-once' as the index does (an at-least-once action holds
// nothing, whatever its state), even where the input's class already rules
// the class out: the planner uses a partial index only for a condition that
// implies its whole predicate (TestHolderLookupsUseHeldIntentIndex).
const heldStatesMarker = "/* queue.HeldStates */"

var heldStatesList = func() string {
	quoted := make([]string, len(queue.HeldStates))
	for i, s := range queue.HeldStates {
		quoted[i] = "'" + string(s) + "'"
	}
	return strings.Join(quoted, ", ")
}()

// heldCondition is how a statement names the holder of a key: the index's
// predicate, term for term.
const heldCondition = "a.state IN (" + heldStatesMarker + ") AND a.class <> 'at-least-once'"

// heldWhere is heldCondition with the states written in, for a statement
// built per call (ActionListParams.Held).
var heldWhere = withHeldStates(heldCondition)

func withHeldStates(stmt string) string {
	if n := strings.Count(stmt, heldStatesMarker); n == 0 || n != strings.Count(stmt, heldCondition) {
		panic("statement does not name the holder of a key as " + heldCondition + ": " + stmt)
	}
	return strings.ReplaceAll(stmt, heldStatesMarker, heldStatesList)
}

// submitSQL is claim-first in one statement: insert the action as the
// holder of its key, or do nothing when a held action (or the same attempt
// number) exists, and read the holder back. A holder committed after this
// statement's snapshot is invisible to the read, so the caller retries.
//
// $21 is the hash of the caller's token, or NULL when the caller checked
// it: a submission whose token was revoked after the caller last saw it
// valid claims nothing and reads nothing (tok.token_hash must stay
// qualified, or it would compare the column with itself).
//
// The replay of a holder (rev) is recorded when the submission has the same
// tool and the same payload text: replayed, or in_progress_refused for an
// exactly-once claim mid-flight, as queue.Service would. Comparing the
// text, not the JSON value, keeps the rule exact; a payload equal only as a
// JSON value (other key order or number spelling) is left to the Service,
// which compares values.
//
// Rows: the action, its current ticket, created, replay recorded.
var submitSQL = withHeldStates(`
WITH ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at)
    SELECT $1, $2, $3, $4,
        CASE WHEN $3 = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(attempt) FROM actions WHERE intent_key = $4 AND class <> 'at-least-once'), 0) + 1 END,
        $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $20
    WHERE ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT id, $17, $18, $8, $9, $19, $22 FROM ins
), holder AS (
    SELECT a.* FROM actions a
    WHERE $3 <> 'at-least-once' AND a.intent_key = $4 AND a.state IN (/* queue.HeldStates */) AND a.class <> 'at-least-once'
      AND NOT EXISTS (SELECT 1 FROM ins)
      AND ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, $18, $8, $9
    FROM holder h WHERE h.tool = $2 AND h.payload::text = $6::text
)
SELECT ` + actionColumns("ins") + `,
    NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text,
    true, false
FROM ins
UNION ALL
SELECT ` + actionColumns("h") + `,
    ` + ticketColumns + `,
    false, h.tool = $2 AND h.payload::text = $6::text
FROM holder h
LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = h.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)

// submitManySQL is submitSQL for the submissions of a batch, in one
// statement, with one array per column and the index of the submission in
// the batch first in each row: each row is inserted as the holder of its
// key unless one is held, in the order of the input (the batch's lock
// order). A submission whose key another of the same batch took gets no
// row: its holder is invisible to this statement, so it retries on its own,
// like any submission that lost a race.
var submitManySQL = withHeldStates(`
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::boolean[], $15::text[], $16::text[], $17::text[], $18::text[],
        $19::text[], $20::timestamptz[], $21::text[], $22::boolean[]) WITH ORDINALITY
    AS i(id, tool, class, intent_key, state, payload, requested_by, channel, created_at, claimed_at,
        claimed_by, claim_deadline, expires_at, has_webhook, spec, warnings, ev_kind, ev_actor,
        ev_data, finished_at, token_hash, ev_unrouted, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at)
    SELECT id, tool, class, intent_key,
        CASE WHEN class = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(a.attempt) FROM actions a WHERE a.intent_key = i.intent_key AND a.class <> 'at-least-once'), 0) + 1 END,
        state, payload::json, requested_by, channel, created_at, claimed_at, claimed_by,
        claim_deadline, expires_at, has_webhook, spec::json, warnings::json, finished_at
    FROM input i ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT ins.id, i.ev_kind, i.ev_actor, ins.channel, ins.created_at, i.ev_data::json, i.ev_unrouted
    FROM ins JOIN input i ON i.id = ins.id
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND a.state IN (/* queue.HeldStates */) AND a.class <> 'at-least-once'
    WHERE i.class <> 'at-least-once' AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, h.ev_actor, h.in_channel, h.in_at
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n
)
SELECT i.n::int - 1, ` + actionColumns("ins") + `,
    NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text,
    true, false
FROM ins JOIN input i ON i.id = ins.id
UNION ALL
SELECT h.n::int - 1, ` + actionColumns("h") + `,
    ` + ticketColumns + `,
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = h.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)

// replayLookupManySQL is the holder half of submitManySQL, for submissions
// whose key this process recently saw held (heldHint): it reads the holder
// and records the replay exactly as submitManySQL would, and inserts no
// action. A submission it returns no row for (no holder any more, or the
// token guard refused) then runs the claiming statement. Without the
// INSERT into actions, PostgreSQL skips what a claim sets up even when it
// conflicts (ten indexes, the CHECK constraints, the conflict checks, the
// attempt number): 73 us per replay instead of 210 us in batches of four
// (docs/performance.md).
var replayLookupManySQL = withHeldStates(`
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::timestamptz[], $7::text[]) WITH ORDINALITY
    AS i(intent_key, tool, payload, ev_actor, channel, created_at, token_hash, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND a.state IN (/* queue.HeldStates */) AND a.class <> 'at-least-once'
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, h.ev_actor, h.in_channel, h.in_at
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n
)
SELECT h.n::int - 1, ` + actionColumns("h") + `,
    ` + ticketColumns + `,
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = h.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)

// replayLookupOneSQL is replayLookupManySQL for one submission, without
// the index column (TestReplayLookupStatementsAgree keeps the two alike).
var replayLookupOneSQL = withHeldStates(`
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::timestamptz[], $7::text[]) WITH ORDINALITY
    AS i(intent_key, tool, payload, ev_actor, channel, created_at, token_hash, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND a.state IN (/* queue.HeldStates */) AND a.class <> 'at-least-once'
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, h.ev_actor, h.in_channel, h.in_at
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n
)
SELECT ` + actionColumns("h") + `,
    ` + ticketColumns + `,
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = h.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)

// ActionSubmit implements queue.Store, with the token guard.
func (s *Store) ActionSubmit(ctx context.Context, p queue.ActionSubmitParams) (queue.ActionSubmitResult, error) {
	a, ev, tokenHash := p.Action, p.Event, p.TokenHash
	var guard *string
	if tokenHash != "" {
		guard = &tokenHash
	}
	if a.Class != classify.AtLeastOnce && s.hint.has(a.IntentKey) {
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
	warnings := a.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	warn, _ := json.Marshal(warnings)
	args := []any{a.ID, a.Tool, string(a.Class), a.IntentKey,
		string(a.State), string(a.Payload), a.RequestedBy, a.Channel, a.CreatedAt, a.ClaimedAt,
		a.ClaimedBy, a.ClaimDeadline(), a.ExpiresAt, a.ServerExecuted(), string(spec), string(warn),
		ev.Kind, ev.Actor, jsonArg(ev.Data), a.FinishedAt, guard, ev.Unrouted}
	in := submitInput{a: a, spec: string(spec), warnings: string(warn), ev: ev, tokenHash: guard}
	// The first try goes through the batcher, sorted by intent key (the lock
	// a submission takes); retries after a lost race run on their own.
	for try := range 10 {
		var (
			v   any
			err error
		)
		if try == 0 {
			v, err = s.batch.call(ctx, &batchCall{kind: submissions{}, arg: in, order: "submit:" + a.IntentKey,
				sql: submitSQL, args: args, scan: scanSubmitted})
		} else {
			v, err = scanSubmitted(s.pool.QueryRow(ctx, submitSQL, args...))
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// The token guard refused, or this lost a race with a holder its
			// snapshot cannot see, or with one released a moment ago.
			if guard != nil {
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
}

// submissions merges the submissions of a batch.
type submissions struct{}

func (submissions) merge(calls []*batchCall) (string, []any) {
	n := len(calls)
	var (
		ids, tools, classes, keys, states, payloads               = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		requestedBy, channels, specs, warnings, evKinds, evActors = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		claimedBy, evData, tokens                                 = make([]*string, n), make([]*string, n), make([]*string, n)
		createdAt                                                 = make([]time.Time, n)
		claimedAt, deadlines, expiresAt, finishedAt               = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		webhooks, unrouted                                        = make([]bool, n), make([]bool, n)
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
	}
	return submitManySQL, []any{ids, tools, classes, keys, states, payloads, requestedBy, channels,
		createdAt, claimedAt, claimedBy, deadlines, expiresAt, webhooks, specs, warnings, evKinds,
		evActors, evData, finishedAt, tokens, unrouted}
}

// submitted is what submitSQL returns: the holder of the intent and whether
// this submission created it.
type submitted struct {
	action                 *queue.Action
	created, replayWritten bool
}

func scanSubmitted(row pgx.Row) (any, error) {
	var created, replayWritten bool
	a, err := scanActionWith(row, &created, &replayWritten)
	if err != nil {
		return nil, err
	}
	return submitted{a, created, replayWritten}, nil
}

// scanActionWith scans an action row followed by extra columns.
func scanActionWith(row pgx.Row, extra ...any) (*queue.Action, error) {
	return scanAction(extraScanner{row, extra})
}

type extraScanner struct {
	row   pgx.Row
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }
