package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

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

// ActionGetByID implements queue.Store.
func (s *Store) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	if !queue.ValidID(id) {
		return nil, queue.ActionNotFound(id)
	}
	a, err := scanAction(s.pool.QueryRow(ctx, actionGetByIDSQL, id))
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
	q, args := actionListSQL(p)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	out, err := collectActions(rows)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// collectActions reads every row of rows (columns as actionListSelect's)
// and closes it.
func collectActions(rows pgx.Rows) ([]*queue.Action, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*queue.Action, error) { return scanAction(row) })
}

// actionListSQL builds ActionList's statement: only the filters p sets
// become conditions, so each combination gets a plan of its own that uses
// the index for it (testdata/action_list.golden shows them).
func actionListSQL(p queue.ActionListParams) (string, []any) {
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
	if p.ServerExecuted {
		where = append(where, "a.has_webhook")
	}
	if p.Held {
		where = append(where, heldWhere)
	}
	order, cmp := "DESC", "<"
	if p.Oldest {
		order, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(a.created_at, a.id) %s (%s, %s::uuid)", cmp, arg(p.After.CreatedAt), arg(p.After.ID)))
	}
	q := actionListSelect
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	q += fmt.Sprintf("\nORDER BY a.created_at %s, a.id %s LIMIT %s", order, order, arg(limit))
	return q, args
}

func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// ActionTransition implements queue.Store. The update, its event, the
// late-report ticket resolution and the answer (the moved action with its
// ticket) are one statement, sent through the transitions' batcher, so
// concurrent transitions (completions, failures, claims, cancels) share one
// commit and one WAL flush, as submissions do; the caller hears of its
// transition only after that commit. A transition that moved nothing
// (another state, another agent, a revoked token) reads the action after
// the commit, as any read would, to say why.
func (s *Store) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if !queue.ValidID(p.ID) {
		return nil, queue.ActionNotFound(p.ID)
	}
	q, args := actionTransitionSQL(p)
	v, err := s.transitions.call(ctx, &batchCall{order: "action:" + strings.ToLower(p.ID), sql: q, args: args,
		scan: func(row pgx.Row) (any, error) { return scanAction(row) }})
	if err == nil {
		return v.(*queue.Action), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("transition %s to %s: %w", p.ID, p.To, err)
	}
	// Nothing moved.
	if p.TokenHash != "" {
		if _, err := s.TokenGetByHash(ctx, p.TokenHash); errors.Is(err, accounts.ErrNotFound) {
			// The caller may not see the action.
			return nil, queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
		} else if err != nil {
			return nil, fmt.Errorf("transition %s to %s: check token: %w", p.ID, p.To, err)
		}
	}
	a, err := scanAction(s.pool.QueryRow(ctx, actionGetByIDSQL, p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.ActionNotFound(p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("transition %s to %s: read it: %w", p.ID, p.To, err)
	}
	return a, fmt.Errorf("transition %s to %s from %s: %w", p.ID, p.To, a.State, queue.ErrStateMismatch)
}

// actionTransitionSQL builds ActionTransition's statement: one conditional
// update that sets only the columns p sets and checks only the conditions
// p asks for, with its event and, for a late report, the resolution of the
// open stale ticket (the action's row is locked first, then the ticket's,
// as on every path). It returns the moved action with its current ticket,
// as actionGetByIDSQL would read it after the statement, or no row when
// nothing moved; testdata/action_transition.golden shows the variants.
func actionTransitionSQL(p queue.ActionTransitionParams) (string, []any) {
	args := sqlArgs{p.ID, string(p.To), p.Now}
	arg := args.add
	var q strings.Builder
	q.WriteString("WITH upd AS (\n    UPDATE actions SET state = $2")
	set := func(col string, v any) { q.WriteString(", " + col + " = " + arg(v)) }
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
	q.WriteString("\n    WHERE id = $1 AND state = ANY(" + arg(from) + ")")
	if p.Unexpired {
		q.WriteString(" AND (expires_at IS NULL OR expires_at > $3)")
	}
	if p.RequestedBy != "" {
		q.WriteString(" AND requested_by = " + arg(p.RequestedBy))
	}
	if p.AgentExecuted {
		q.WriteString(" AND NOT has_webhook")
	}
	if p.TokenHash != "" {
		// tok.token_hash stays qualified, or it would compare the column
		// with itself.
		q.WriteString(" AND EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = " + arg(p.TokenHash) + " AND tok.revoked_at IS NULL)")
	}
	q.WriteString(`
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT id, ` + arg(p.Event.Kind) + `, ` + arg(p.Event.Actor) + `, ` + arg(p.Event.Channel) + `, $3, ` + arg(jsonArg(p.Event.Data)) + `::json, ` + arg(p.Event.Unrouted) + ` FROM upd
)`)
	if p.ResolveStaleTicket {
		by := arg(p.Event.Actor)
		q.WriteString(`, tk AS (
    UPDATE tickets SET state = 'resolved', resolved_at = $3, resolved_by = ` + by + `, outcome = $2, note = ` + arg(queue.LateReportNote) + `
    WHERE action_id IN (SELECT id FROM upd) AND kind = 'stale' AND state = 'open'
    RETURNING *
), tkev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, 'ticket_resolved', ` + by + `, ` + arg(p.Event.Channel) + `, $3,
        json_build_object('ticket', id::text, 'kind', 'stale', 'outcome', $2::text, 'note', note) FROM tk
)`)
	}
	// The answer: the statement's snapshot holds the tickets as they were
	// before it, so a ticket it resolved comes from tk instead.
	tickets := "SELECT * FROM tickets t WHERE t.action_id = u.id"
	if p.ResolveStaleTicket {
		tickets = "SELECT * FROM (SELECT * FROM tickets t WHERE t.action_id = u.id AND t.id NOT IN (SELECT id FROM tk)\n        UNION ALL SELECT * FROM tk) t"
	}
	q.WriteString(`
SELECT ` + movedColumns + `,
    ` + ticketColumns + `
FROM upd u
LEFT JOIN LATERAL (
    ` + tickets + `
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)
	return q.String(), args
}

// ActionExpireDue implements queue.Store.
func (s *Store) ActionExpireDue(ctx context.Context, p queue.DueParams) ([]*queue.Action, error) {
	rows, err := s.pool.Query(ctx, actionExpireDueSQL, p.Now, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	out, err := collectActions(rows)
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	return out, nil
}

// ActionCountByState implements queue.Store.
func (s *Store) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	rows, err := s.pool.Query(ctx, actionCountByStateSQL)
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
