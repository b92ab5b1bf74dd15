package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

const actionColumns = `id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
	requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
	finished_at, expires_at, spec, warnings, approvals, escalated_at, grant_id`

type scanner interface{ Scan(dest ...any) error }

// actionRow is an actions row as stored (actionColumns), before decoding.
// A write call scans into it inside the write transaction and decodes it
// (times, JSON of the tool snapshot, warnings and approvals) after the
// commit, outside the writer's critical section.
type actionRow struct {
	id, tool, class, intentKey       string
	attempt                          int
	state, payload, spec, warnings   string
	createdAt, approvals             string
	approved, result, errText        sql.NullString
	requestedBy, channel             string
	decidedBy, note, claimedBy       sql.NullString
	decidedAt, claimedAt, finishedAt sql.NullString
	expiresAt, escalatedAt, grantID  sql.NullString
}

func (r *actionRow) scan(sc scanner) error {
	return sc.Scan(&r.id, &r.tool, &r.class, &r.intentKey, &r.attempt, &r.state, &r.payload, &r.approved, &r.result,
		&r.errText, &r.requestedBy, &r.channel, &r.decidedBy, &r.note, &r.createdAt, &r.decidedAt, &r.claimedAt,
		&r.claimedBy, &r.finishedAt, &r.expiresAt, &r.spec, &r.warnings, &r.approvals, &r.escalatedAt, &r.grantID)
}

// action decodes the row.
func (r *actionRow) action() (*queue.Action, error) {
	a := queue.Action{ID: r.id, Tool: r.tool, IntentKey: r.intentKey, Attempt: r.attempt,
		RequestedBy: r.requestedBy, Channel: r.channel}
	a.Class = classify.Class(r.class)
	a.State = queue.State(r.state)
	a.Payload = json.RawMessage(r.payload)
	a.ApprovedPayload = rawJSON(r.approved)
	a.Result = rawJSON(r.result)
	a.Error = ptrString(r.errText)
	a.DecidedBy = ptrString(r.decidedBy)
	a.DecisionNote = ptrString(r.note)
	a.ClaimedBy = ptrString(r.claimedBy)
	a.GrantID = r.grantID.String
	var err error
	if a.CreatedAt, err = parseTime(r.createdAt); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		dst **time.Time
		src sql.NullString
	}{{&a.DecidedAt, r.decidedAt}, {&a.ClaimedAt, r.claimedAt}, {&a.FinishedAt, r.finishedAt}, {&a.ExpiresAt, r.expiresAt}, {&a.EscalatedAt, r.escalatedAt}} {
		if *f.dst, err = parseNullTime(f.src); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal([]byte(r.spec), &a.Spec); err != nil {
		return nil, fmt.Errorf("action %s: stored tool definition: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(r.warnings), &a.Warnings); err != nil {
		return nil, fmt.Errorf("action %s: stored warnings: %w", a.ID, err)
	}
	if a.Approvals, err = queue.DecodeApprovals([]byte(r.approvals)); err != nil {
		return nil, fmt.Errorf("action %s: stored approvals: %w", a.ID, err)
	}
	a.ApprovalsRequired = a.Spec.Approval.RequiredApprovals()
	return &a, nil
}

func scanAction(sc scanner) (*queue.Action, error) {
	var r actionRow
	if err := r.scan(sc); err != nil {
		return nil, err
	}
	return r.action()
}

// getAction reads one action without its ticket.
func getAction(ctx context.Context, q querier, id string) (*queue.Action, error) {
	a, err := scanAction(q.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, queue.ActionNotFound(id)
	}
	return a, err
}

// actionTicket returns the ticket attachTickets would attach to the action
// id (its open ticket if any, else its most recent one), or nil. One row by
// the tickets_action index, in a statement the writer keeps prepared.
func actionTicket(ctx context.Context, q querier, id string) (*queue.Ticket, error) {
	t, err := scanTicket(q.QueryRowContext(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE action_id = ?
		ORDER BY state = 'open' DESC, opened_at DESC, id DESC LIMIT 1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

// getActionWithTicket reads one action and attaches its ticket.
func getActionWithTicket(ctx context.Context, q querier, id string) (*queue.Action, error) {
	a, err := getAction(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if a.Ticket, err = actionTicket(ctx, q, id); err != nil {
		return nil, err
	}
	return a, nil
}

// storableTimes refuses times that timeLayout cannot write and read back
// (years outside 0-9999) before they are stored: a written row is decoded
// only after its commit, where a failure could no longer undo the write.
func storableTimes(times ...*time.Time) error {
	for _, t := range times {
		if t != nil {
			if y := t.UTC().Year(); y < 0 || y > 9999 {
				return fmt.Errorf("time %s cannot be stored", t)
			}
		}
	}
	return nil
}

// heldStates is queue.HeldStates as an SQL list.
var heldStates = stateList(queue.HeldStates)

// stateList writes states as SQL literals: 'a', 'b'.
func stateList(states []queue.State) string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return "'" + strings.Join(out, "', '") + "'"
}

// ActionGetByID returns the action with its ticket.
func (s *Store) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	var a *queue.Action
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = getActionWithTicket(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get action: %w", err)
	}
	return a, nil
}

// globEscape quotes the GLOB metacharacters of a literal prefix. GLOB, unlike
// SQLite's LIKE, is case-sensitive (as LIKE is on PostgreSQL) and can use the
// BINARY index on intent_key for a prefix.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[':
			b.WriteByte('[')
			b.WriteRune(r)
			b.WriteByte(']')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ActionList returns actions matching p in (created_at, id) order.
func (s *Store) ActionList(ctx context.Context, p queue.ActionListParams) ([]*queue.Action, error) {
	var (
		where []string
		args  []any
	)
	if p.IDs != nil {
		if len(p.IDs) == 0 {
			where = append(where, `0`)
		} else {
			where = append(where, `id IN (`+placeholders(len(p.IDs))+`)`)
			for _, id := range p.IDs {
				args = append(args, id)
			}
		}
	}
	if p.IntentKey != "" {
		where = append(where, `intent_key = ?`)
		args = append(args, p.IntentKey)
	}
	if p.IntentKeyPrefix != "" {
		where = append(where, `intent_key GLOB ?`)
		args = append(args, globEscape(p.IntentKeyPrefix)+"*")
	}
	if p.State != "" {
		where = append(where, `state = ?`)
		args = append(args, string(p.State))
	}
	if p.Tool != "" {
		where = append(where, `tool = ?`)
		args = append(args, p.Tool)
	}
	if p.ServerExecuted {
		where = append(where, `has_webhook = 1`)
	}
	if p.Held {
		// actions_held_intent's predicate, term for term.
		where = append(where, `state IN (`+heldStates+`) AND class <> 'at-least-once'`)
	}
	if p.GrantID != "" {
		where = append(where, `grant_id = ?`)
		args = append(args, p.GrantID)
	}
	dir, cmp := "DESC", "<"
	if p.Oldest {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, `(created_at, id) `+cmp+` (?, ?)`)
		args = append(args, fmtTime(p.After.CreatedAt), p.After.ID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	query := `SELECT ` + actionColumns + ` FROM actions`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY created_at ` + dir + `, id ` + dir + ` LIMIT ?`
	args = append(args, limit)

	var list []*queue.Action
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		if list, err = queryActions(ctx, tx, query, args...); err != nil {
			return err
		}
		return attachTickets(ctx, tx, list)
	})
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return list, nil
}

func queryActions(ctx context.Context, q querier, query string, args ...any) ([]*queue.Action, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []*queue.Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, a)
	}
	return list, rows.Err()
}

// ActionCountByState counts actions per state.
func (s *Store) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT state, count(*) FROM actions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	defer rows.Close()
	counts := make(map[queue.State]int64)
	for rows.Next() {
		var (
			state string
			n     int64
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count actions: %w", err)
		}
		counts[queue.State(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	return counts, nil
}
