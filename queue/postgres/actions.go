package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// actionColumns lists the action columns in scan order; prefix names the
// table alias. ticketColumns follow them in full reads.
func actionColumns(prefix string) string {
	cols := []string{"id::text", "tool", "class", "intent_key", "attempt", "state", "payload",
		"approved_payload", "result", "error", "requested_by", "channel", "decided_by",
		"decision_note", "created_at", "decided_at", "claimed_at", "claimed_by", "finished_at",
		"expires_at", "spec", "warnings", "approvals", "escalated_at"}
	for i, c := range cols {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

const ticketColumns = `t.id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note`
const noTicketColumns = `NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text`

// currentTicket joins an action (alias a) with its current ticket t: the
// open one if any, else the most recent.
func currentTicket(a string) string {
	return `LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = ` + a + `.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`
}

// selectAction reads actions with their current ticket.
var selectAction = `SELECT ` + actionColumns("a.") + `, ` + ticketColumns + `
FROM actions a
` + currentTicket("a")

type rowScanner interface{ Scan(dest ...any) error }

func scanAction(row rowScanner) (*queue.Action, error) {
	var (
		a                                         queue.Action
		class, state                              string
		payload, approved, result, spec, warnings []byte
		approvals                                 []byte
		tID, tKind, tState, tBy, tOutcome, tNote  *string
		tOpened, tResolved                        *time.Time
	)
	err := row.Scan(&a.ID, &a.Tool, &class, &a.IntentKey, &a.Attempt, &state, &payload,
		&approved, &result, &a.Error, &a.RequestedBy, &a.Channel, &a.DecidedBy,
		&a.DecisionNote, &a.CreatedAt, &a.DecidedAt, &a.ClaimedAt, &a.ClaimedBy, &a.FinishedAt,
		&a.ExpiresAt, &spec, &warnings, &approvals, &a.EscalatedAt,
		&tID, &tKind, &tState, &tOpened, &tResolved, &tBy, &tOutcome, &tNote)
	if err != nil {
		return nil, err
	}
	a.Class = classify.Class(class)
	a.State = queue.State(state)
	a.Payload = json.RawMessage(payload)
	a.ApprovedPayload = nullableJSON(approved)
	a.Result = nullableJSON(result)
	if a.Spec, err = decodeSpec(spec); err != nil {
		return nil, fmt.Errorf("decode tool snapshot of action %s: %w", a.ID, err)
	}
	if string(warnings) == "[]" {
		// Most actions have none; skip the decoder.
		a.Warnings = []string{}
	} else if err := json.Unmarshal(warnings, &a.Warnings); err != nil {
		return nil, fmt.Errorf("decode warnings of action %s: %w", a.ID, err)
	}
	if a.Warnings == nil {
		a.Warnings = []string{}
	}
	if a.Approvals, err = queue.DecodeApprovals(approvals); err != nil {
		return nil, fmt.Errorf("decode approvals of action %s: %w", a.ID, err)
	}
	a.ApprovalsRequired = a.Spec.Approval.RequiredApprovals()
	utc(&a.CreatedAt)
	utcp(a.DecidedAt, a.ClaimedAt, a.FinishedAt, a.ExpiresAt, a.EscalatedAt)
	if tID != nil {
		t := &queue.Ticket{ID: *tID, ActionID: a.ID, Kind: queue.TicketKind(*tKind),
			State: queue.TicketState(*tState), OpenedAt: tOpened.UTC(), ResolvedAt: tResolved,
			ResolvedBy: tBy, Note: tNote}
		utcp(t.ResolvedAt)
		if tOutcome != nil {
			o := queue.State(*tOutcome)
			t.Outcome = &o
		}
		a.Ticket = t
	}
	return &a, nil
}

// specs caches decoded tool snapshots. Every action stores the snapshot of
// its tool, so a table holds few distinct ones, and decoding the same JSON
// for every row read was the largest single cost of reading actions. The
// decoded values are shared: nothing modifies a snapshot after decoding.
var specs = struct {
	sync.Mutex
	m map[string]classify.Tool
}{m: map[string]classify.Tool{}}

func decodeSpec(b []byte) (classify.Tool, error) {
	specs.Lock()
	t, ok := specs.m[string(b)]
	specs.Unlock()
	if ok {
		return t, nil
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return classify.Tool{}, err
	}
	specs.Lock()
	if len(specs.m) >= 1024 {
		clear(specs.m) // tools files change rarely; start over
	}
	specs.m[string(b)] = t
	specs.Unlock()
	return t, nil
}

func nullableJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func utc(t *time.Time) { *t = t.UTC() }

func utcp(ts ...*time.Time) {
	for _, t := range ts {
		if t != nil {
			*t = t.UTC()
		}
	}
}

func jsonArg(m json.RawMessage) any {
	if m == nil {
		return nil
	}
	return string(m)
}

var heldStates = func() string {
	var b strings.Builder
	for i, s := range queue.HeldStates {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + string(s) + "'")
	}
	return b.String()
}()

// submitSQL is claim-first in one statement: insert the action as the
// holder of its key, or do nothing when a held action (or the same attempt
// number) exists, and read the holder back. A holder committed after this
// statement's snapshot is invisible to the read, so the caller retries.
var submitSQL = `
WITH ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at)
    SELECT $1, $2, $3, $4,
        CASE WHEN $3 = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(attempt) FROM actions WHERE intent_key = $4 AND class <> 'at-least-once'), 0) + 1 END,
        $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $20
    WHERE ` + tokenGuard("$21::text") + `
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, $17, $18, $8, $9, $19 FROM ins
), holder AS (
    SELECT a.* FROM actions a
    WHERE $3 <> 'at-least-once' AND a.intent_key = $4 AND a.state IN (` + heldStates + `)
      AND NOT EXISTS (SELECT 1 FROM ins) AND ` + tokenGuard("$21::text") + `
), rev AS (
    ` + replayEventInsert("h", "$18", "$8", "$9") + `
    FROM holder h WHERE h.tool = $2 AND h.payload::text = $6::text
)
SELECT ` + actionColumns("ins.") + `, ` + noTicketColumns + `, true, false FROM ins
UNION ALL
SELECT ` + actionColumns("h.") + `, ` + ticketColumns + `, false, h.tool = $2 AND h.payload::text = $6::text
FROM holder h
` + currentTicket("h")

// tokenGuard is true when hash is NULL (the caller checked the token) or
// an active agent token has it: a submission whose token was revoked after
// the caller last saw it valid claims nothing and reads nothing. hash must
// be qualified (i.token_hash): unqualified, it would name the column of
// agent_tokens inside the subquery and compare it with itself.
func tokenGuard(hash string) string {
	return `(` + hash + ` IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = ` + hash + ` AND tok.revoked_at IS NULL))`
}

// replayEventInsert records the replay of a holder (alias h) by a
// submission with the same tool and the same payload text: replayed, or
// in_progress_refused for an exactly-once claim mid-flight, as
// queue.Service would. Comparing the text, not the JSON value, keeps the
// rule exact; a payload equal only as a JSON value (other key order or
// number spelling) is left to the Service, which compares values.
func replayEventInsert(h, actor, channel, at string) string {
	return `INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT ` + h + `.id, CASE WHEN ` + h + `.state = 'in_progress' AND ` + h + `.class = 'exactly-once'
        THEN '` + queue.EventInProgressSeen + `' ELSE '` + queue.EventReplayed + `' END, ` + actor + `, ` + channel + `, ` + at
}

// ActionSubmit implements queue.Store.
func (s *Store) ActionSubmit(ctx context.Context, a *queue.Action, ev queue.Event) (*queue.Action, bool, bool, error) {
	return s.ActionSubmitGuarded(ctx, a, ev, "")
}

// ActionSubmitGuarded implements queue.GuardedSubmitter.
func (s *Store) ActionSubmitGuarded(ctx context.Context, a *queue.Action, ev queue.Event, tokenHash string) (*queue.Action, bool, bool, error) {
	var guard *string
	if tokenHash != "" {
		guard = &tokenHash
	}
	if a.Class != classify.AtLeastOnce && s.hint.has(a.IntentKey) {
		got, err := s.lookupReplay(ctx, a, ev, guard)
		if err == nil {
			s.found.Add(1)
			return got.action, false, got.replayWritten, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, false, fmt.Errorf("submit %s: %w", a.IntentKey, err)
		}
		// Released since, or the token guard refused: claim as always.
		s.missed.Add(1)
		s.hint.forget(a.IntentKey)
	}
	spec, err := json.Marshal(a.Spec)
	if err != nil {
		return nil, false, false, fmt.Errorf("encode tool snapshot: %w", err)
	}
	warnings := a.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	warn, _ := json.Marshal(warnings)
	args := []any{a.ID, a.Tool, string(a.Class), a.IntentKey,
		string(a.State), string(a.Payload), a.RequestedBy, a.Channel, a.CreatedAt, a.ClaimedAt,
		a.ClaimedBy, a.ClaimDeadline(), a.ExpiresAt, a.HasWebhook(), string(spec), string(warn),
		ev.Kind, ev.Actor, jsonArg(ev.Data), a.FinishedAt, guard}
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
					return nil, false, false, queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
				} else if terr != nil {
					return nil, false, false, fmt.Errorf("submit %s: check token: %w", a.IntentKey, terr)
				}
			}
			continue
		}
		if err != nil {
			return nil, false, false, fmt.Errorf("submit %s: %w", a.IntentKey, err)
		}
		got := v.(submitted)
		if got.created {
			a.Attempt = got.action.Attempt
		}
		if a.Class != classify.AtLeastOnce && slices.Contains(queue.HeldStates, got.action.State) {
			s.hint.add(a.IntentKey)
		}
		return got.action, got.created, got.replayWritten, nil
	}
	return nil, false, false, fmt.Errorf("submit %s: intent changed hands too often; try again", a.IntentKey)
}

// submitManySQL is submitSQL for the submissions of a batch, in one
// statement: each row is inserted as the holder of its key unless one is
// held, in the order of the input (the batch's lock order). A submission
// whose key another of the same batch took gets no row: its holder is
// invisible to this statement, so it retries on its own, like any
// submission that lost a race.
var submitManySQL = `
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::boolean[], $15::text[], $16::text[], $17::text[], $18::text[],
        $19::text[], $20::timestamptz[], $21::text[]) WITH ORDINALITY
    AS i(id, tool, class, intent_key, state, payload, requested_by, channel, created_at, claimed_at,
        claimed_by, claim_deadline, expires_at, has_webhook, spec, warnings, ev_kind, ev_actor,
        ev_data, finished_at, token_hash, n)
    WHERE ` + tokenGuard("i.token_hash") + `
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
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT ins.id, i.ev_kind, i.ev_actor, ins.channel, ins.created_at, i.ev_data::json
    FROM ins JOIN input i ON i.id = ins.id
), holder AS (
    SELECT ` + holderColumns + `
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND a.state IN (` + heldStates + `)
    WHERE i.class <> 'at-least-once' AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
), rev AS (
    ` + holderReplayEvents + `
)
SELECT i.n::int - 1, ` + actionColumns("ins.") + `, ` + noTicketColumns + `, true, false
FROM ins JOIN input i ON i.id = ins.id
UNION ALL
` + holderRows("h.n::int - 1, ")

// The holder part shared by submitManySQL and replayLookupSQL: a holder
// row carries the submission's n, tool, payload, actor, channel and time
// (from input i) before the action's columns (a); the replay is recorded
// when tool and payload text are the same; holderRows returns each holder
// with its current ticket as scanSubmitted reads it, after index.
const holderColumns = `i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*`

var holderReplayEvents = replayEventInsert("h", "h.ev_actor", "h.in_channel", "h.in_at") + `
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n`

func holderRows(index string) string {
	return `SELECT ` + index + actionColumns("h.") + `, ` + ticketColumns + `, false,
    h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
` + currentTicket("h")
}

// replayLookupSQL is the holder half of submitManySQL, for submissions
// whose key this process recently saw held (heldHint): it reads the holder
// and records the replay exactly as submitManySQL would, and inserts no
// action. A submission it returns no row for (no holder any more, or the
// token guard refused) then runs the claiming statement. Without the
// INSERT into actions, PostgreSQL skips what a claim sets up even when it
// conflicts (ten indexes, the CHECK constraints, the conflict checks, the
// attempt number): 73 us per replay instead of 210 us in batches of four
// (docs/performance.md). merged adds the row's index in the batch first.
func replayLookupSQL(merged bool) string {
	index := ""
	if merged {
		index = "h.n::int - 1, "
	}
	return `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::timestamptz[], $7::text[]) WITH ORDINALITY
    AS i(intent_key, tool, payload, ev_actor, channel, created_at, token_hash, n)
    WHERE ` + tokenGuard("i.token_hash") + `
), holder AS (
    SELECT ` + holderColumns + `
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND a.state IN (` + heldStates + `)
), rev AS (
    ` + holderReplayEvents + `
)
` + holderRows(index)
}

var (
	replayLookupOneSQL  = replayLookupSQL(false)
	replayLookupManySQL = replayLookupSQL(true)
)

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
	v, err := s.batch.call(ctx, &batchCall{kind: replayLookups{}, arg: in, order: "submit:" + a.IntentKey,
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
		webhooks                                                  = make([]bool, n)
	)
	for i, c := range calls {
		in := c.arg.(submitInput)
		a := in.a
		ids[i], tools[i], classes[i], keys[i], states[i], payloads[i] = a.ID, a.Tool, string(a.Class), a.IntentKey, string(a.State), string(a.Payload)
		requestedBy[i], channels[i], specs[i], warnings[i], evKinds[i], evActors[i] = a.RequestedBy, a.Channel, in.spec, in.warnings, in.ev.Kind, in.ev.Actor
		claimedBy[i], createdAt[i], claimedAt[i], deadlines[i], expiresAt[i], finishedAt[i] = a.ClaimedBy, a.CreatedAt, a.ClaimedAt, a.ClaimDeadline(), a.ExpiresAt, a.FinishedAt
		webhooks[i] = a.HasWebhook()
		tokens[i] = in.tokenHash
		if in.ev.Data != nil {
			d := string(in.ev.Data)
			evData[i] = &d
		}
	}
	return submitManySQL, []any{ids, tools, classes, keys, states, payloads, requestedBy, channels,
		createdAt, claimedAt, claimedBy, deadlines, expiresAt, webhooks, specs, warnings, evKinds,
		evActors, evData, finishedAt, tokens}
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

// ActionGetByID implements queue.Store.
func (s *Store) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	if !queue.ValidID(id) {
		return nil, queue.ActionNotFound(id)
	}
	a, err := scanAction(s.pool.QueryRow(ctx, selectAction+` WHERE a.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.ActionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get action %s: %w", id, err)
	}
	return a, nil
}

// ActionList implements queue.Store.
func (s *Store) ActionList(ctx context.Context, p queue.ActionListParams) ([]*queue.Action, error) {
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if p.IDs != nil {
		ids := make([]string, 0, len(p.IDs))
		for _, id := range p.IDs {
			if queue.ValidID(id) {
				ids = append(ids, id)
			}
		}
		where = append(where, "a.id = ANY("+arg(ids)+"::uuid[])")
	}
	if p.IntentKey != "" {
		where = append(where, "a.intent_key = "+arg(p.IntentKey))
	}
	if p.IntentKeyPrefix != "" {
		where = append(where, "a.intent_key LIKE "+arg(likePrefix(p.IntentKeyPrefix)))
	}
	if p.State != "" {
		where = append(where, "a.state = "+arg(string(p.State)))
	}
	if p.Tool != "" {
		where = append(where, "a.tool = "+arg(p.Tool))
	}
	if p.Webhook {
		where = append(where, "a.has_webhook")
	}
	order, cmp := "DESC", "<"
	if p.Oldest {
		order, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(a.created_at, a.id) %s (%s, %s::uuid)", cmp, arg(p.After.CreatedAt), arg(p.After.ID)))
	}
	q := selectAction
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	q += fmt.Sprintf(" ORDER BY a.created_at %s, a.id %s LIMIT %s", order, order, arg(limit))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	defer rows.Close()
	var out []*queue.Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, fmt.Errorf("list actions: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// ActionTransition implements queue.Store. The update, its event and the
// late-report ticket resolution are one statement; the read-back of the
// action rides in the same pipelined batch, so a transition costs one round
// trip.
func (s *Store) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if !queue.ValidID(p.ID) {
		return nil, queue.ActionNotFound(p.ID)
	}
	var (
		sets []string
		args = sqlArgs{p.ID, string(p.To), p.Now}
	)
	arg := args.add
	set := func(col string, v any) { sets = append(sets, col+" = "+arg(v)) }
	if p.DecidedBy != nil {
		set("decided_by", *p.DecidedBy)
	}
	if p.DecisionNote != nil {
		set("decision_note", *p.DecisionNote)
	}
	if p.DecidedAt != nil {
		set("decided_at", *p.DecidedAt)
	}
	if p.ApprovedPayload != nil {
		set("approved_payload", string(p.ApprovedPayload))
	}
	if p.Result != nil {
		set("result", string(p.Result))
	}
	if p.Error != nil {
		set("error", *p.Error)
	}
	if p.ClaimedAt != nil {
		set("claimed_at", *p.ClaimedAt)
	}
	if p.ClaimedBy != nil {
		set("claimed_by", *p.ClaimedBy)
	}
	if p.ClaimDeadline != nil {
		set("claim_deadline", *p.ClaimDeadline)
	}
	if p.FinishedAt != nil {
		set("finished_at", *p.FinishedAt)
	}
	if p.ExpiresAt != nil {
		set("expires_at", *p.ExpiresAt)
	}
	from := make([]string, len(p.From))
	for i, st := range p.From {
		from[i] = string(st)
	}
	cond := "id = $1 AND state = ANY(" + arg(from) + ")"
	if p.Unexpired {
		cond += " AND (expires_at IS NULL OR expires_at > $3)"
	}
	if p.RequestedBy != "" {
		cond += " AND requested_by = " + arg(p.RequestedBy)
	}
	if p.AgentExecuted {
		cond += " AND NOT has_webhook"
	}
	q := "WITH upd AS (UPDATE actions SET state = $2"
	for _, st := range sets {
		q += ", " + st
	}
	q += " WHERE " + cond + " RETURNING id), ev AS (INSERT INTO events (action_id, kind, actor, channel, at, data) SELECT id, " +
		arg(p.Event.Kind) + ", " + arg(p.Event.Actor) + ", " + arg(p.Event.Channel) + ", $3, " + arg(jsonArg(p.Event.Data)) + "::json FROM upd)"
	if p.ResolveStaleTicket {
		by := arg(p.Event.Actor)
		q += `, tk AS (UPDATE tickets SET state = 'resolved', resolved_at = $3, resolved_by = ` + by +
			`, outcome = $2, note = ` + arg(queue.LateReportNote) + ` WHERE action_id IN (SELECT id FROM upd) AND kind = 'stale' AND state = 'open'
    RETURNING id, action_id, note)
, tkev AS (INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, 'ticket_resolved', ` + by + `, ` + arg(p.Event.Channel) + `, $3,
        json_build_object('ticket', id::text, 'kind', 'stale', 'outcome', $2::text, 'note', note) FROM tk)`
	}
	q += " SELECT count(*) FROM upd"

	batch := &pgx.Batch{}
	var n int
	batch.Queue(q, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	var a *queue.Action
	batch.Queue(selectAction+` WHERE a.id = $1`, p.ID).QueryRow(func(row pgx.Row) error {
		var err error
		a, err = scanAction(row)
		return err
	})
	err := s.pool.SendBatch(ctx, batch).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.ActionNotFound(p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("transition %s to %s: %w", p.ID, p.To, err)
	}
	if n == 0 {
		return a, fmt.Errorf("transition %s to %s from %s: %w", p.ID, p.To, a.State, queue.ErrStateMismatch)
	}
	return a, nil
}

// ActionExpireDue implements queue.Store. SKIP LOCKED lets several sweepers
// share the work instead of queueing behind each other.
func (s *Store) ActionExpireDue(ctx context.Context, now time.Time, limit int) ([]*queue.Action, error) {
	q := `
WITH due AS (
    SELECT id FROM actions
    WHERE state IN ('pending', 'approved') AND expires_at <= $1
    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET state = 'expired', finished_at = $1,
        decided_by = CASE WHEN a.state = 'pending' THEN 'system' ELSE a.decided_by END,
        decided_at = CASE WHEN a.state = 'pending' THEN $1 ELSE a.decided_at END
    FROM due WHERE a.id = due.id AND a.state IN ('pending', 'approved')
    RETURNING a.*
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, 'expired', 'system', '', $1, NULL FROM upd
)
SELECT ` + actionColumns("upd.") + `, ` + noTicketColumns + ` FROM upd`
	rows, err := s.pool.Query(ctx, q, now, limit)
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	defer rows.Close()
	var out []*queue.Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, fmt.Errorf("expire due actions: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ActionCountByState implements queue.Store.
func (s *Store) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM actions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	defer rows.Close()
	out := map[queue.State]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[queue.State(st)] = n
	}
	return out, rows.Err()
}
