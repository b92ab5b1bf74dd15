package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// The statements that read tickets return the columns scanTicket reads.

const ticketGetByIDSQL = `SELECT t.id::text, t.action_id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note
FROM tickets t WHERE t.id = $1`

// ticketLockSQL reads a ticket and locks it; the action's row must be
// locked first (ticketLockActionSQL).
const ticketLockSQL = `SELECT t.id::text, t.action_id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note
FROM tickets t WHERE t.id = $1 FOR UPDATE`

// ticketLockActionSQL locks the action of a ticket: every path that
// changes an action and its tickets locks the action first, then the
// ticket, so that they never wait for each other in a circle.
const ticketLockActionSQL = `SELECT 1 FROM actions WHERE id = $1 FOR UPDATE`

const ticketOpenConflictGetSQL = `SELECT t.id::text, t.action_id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note
FROM tickets t WHERE t.action_id = $1 AND t.kind = 'conflict' AND t.state = 'open'`

// ticketListSelect is what ticketListSQL adds its WHERE clause to.
const ticketListSelect = `SELECT t.id::text, t.action_id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note
FROM tickets t`

func scanTicket(row rowScanner) (*queue.Ticket, error) {
	var (
		t           queue.Ticket
		kind, state string
		outcome     *string
	)
	if err := row.Scan(&t.ID, &t.ActionID, &kind, &state, &t.OpenedAt, &t.ResolvedAt, &t.ResolvedBy, &outcome, &t.Note); err != nil {
		return nil, err
	}
	t.Kind, t.State = queue.TicketKind(kind), queue.TicketState(state)
	t.OpenedAt = t.OpenedAt.UTC()
	utcp(t.ResolvedAt)
	if outcome != nil {
		o := queue.State(*outcome)
		t.Outcome = &o
	}
	return &t, nil
}

func collectTickets(rows pgx.Rows) ([]*queue.Ticket, error) {
	defer rows.Close()
	var out []*queue.Ticket
	for rows.Next() {
		t, err := scanTicket(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ticketOpenStaleSQL opens a stale ticket for up to $2 in_progress actions
// whose claim deadline is at or before $1 and that have no open one. The
// partial unique index tickets_one_open makes concurrent sweeps open one
// ticket, not several.
const ticketOpenStaleSQL = `
WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'in_progress' AND a.claim_deadline <= $1
      AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.action_id = a.id AND t.kind = 'stale' AND t.state = 'open')
    ORDER BY a.claim_deadline LIMIT $2
    -- Lock the claims: a late report finishing one meanwhile waits, and a
    -- claim finished before the lock is re-checked and skipped.
    FOR UPDATE OF a SKIP LOCKED
), ins AS (
    INSERT INTO tickets (id, action_id, kind, state, opened_at)
    SELECT gen_random_uuid(), id, 'stale', 'open', $1 FROM due
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, 'ticket_opened', 'system', '', $1, json_build_object('ticket', id::text, 'kind', 'stale') FROM ins
)
SELECT id::text, action_id::text, kind, state, opened_at, resolved_at, resolved_by, outcome, note FROM ins`

// TicketOpenStale implements queue.Store.
func (s *Store) TicketOpenStale(ctx context.Context, p queue.DueParams) ([]*queue.Ticket, error) {
	rows, err := s.pool.Query(ctx, ticketOpenStaleSQL, p.Now, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("open stale tickets: %w", err)
	}
	out, err := collectTickets(rows)
	if err != nil {
		return nil, fmt.Errorf("open stale tickets: %w", err)
	}
	return out, nil
}

// ticketOpenConflictSQL opens a conflict ticket for action $1 unless one
// is open (tickets_one_open); then it returns no row and the caller reads
// the open one (ticketOpenConflictGetSQL).
const ticketOpenConflictSQL = `INSERT INTO tickets (id, action_id, kind, state, opened_at) VALUES (gen_random_uuid(), $1, 'conflict', 'open', $2)
ON CONFLICT DO NOTHING
RETURNING id::text, action_id::text, kind, state, opened_at, resolved_at, resolved_by, outcome, note`

// TicketOpenConflict implements queue.Store.
func (s *Store) TicketOpenConflict(ctx context.Context, p queue.TicketOpenConflictParams) (*queue.Ticket, error) {
	actionID, now, ev := p.ActionID, p.Now, p.Event
	if !queue.ValidID(actionID) {
		return nil, queue.ActionNotFound(actionID)
	}
	var t *queue.Ticket
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// Lock order: the action, then its tickets.
		tag, err := tx.Exec(ctx, ticketLockActionSQL, actionID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return queue.ActionNotFound(actionID)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, $2, $3, $4, $5, $6)`,
			actionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)); err != nil {
			return err
		}
		t, err = scanTicket(tx.QueryRow(ctx, ticketOpenConflictSQL, actionID, now))
		if errors.Is(err, pgx.ErrNoRows) {
			t, err = scanTicket(tx.QueryRow(ctx, ticketOpenConflictGetSQL, actionID))
			return err
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, 'ticket_opened', 'system', '', $2, $3)`,
			actionID, now, string(queue.TicketEventData(t.ID, queue.TicketConflict, "", "", nil)))
		return err
	})
	if errors.Is(err, queue.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open conflict ticket for %s: %w", actionID, err)
	}
	return t, nil
}

// TicketGetByID implements queue.Store.
func (s *Store) TicketGetByID(ctx context.Context, id string) (*queue.Ticket, error) {
	if !queue.ValidID(id) {
		return nil, queue.TicketNotFound(id)
	}
	t, err := scanTicket(s.pool.QueryRow(ctx, ticketGetByIDSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.TicketNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get ticket %s: %w", id, err)
	}
	return t, nil
}

// TicketList implements queue.Store.
func (s *Store) TicketList(ctx context.Context, p queue.TicketListParams) ([]*queue.Ticket, error) {
	if p.ActionID != "" && !queue.ValidID(p.ActionID) {
		return nil, nil
	}
	q, args := ticketListSQL(p)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	out, err := collectTickets(rows)
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	return out, nil
}

// ticketListSQL builds TicketList's statement from the filters p sets
// (testdata/ticket_list.golden).
func ticketListSQL(p queue.TicketListParams) (string, []any) {
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if p.State != "" {
		where = append(where, "t.state = "+arg(string(p.State)))
	}
	if p.ActionID != "" {
		where = append(where, "t.action_id = "+arg(p.ActionID))
	}
	q := ticketListSelect
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += "\nORDER BY t.opened_at, t.id LIMIT " + arg(limit)
	return q, args
}

const ticketCountOpenSQL = `SELECT count(*) FROM tickets WHERE state = 'open'`

// TicketCountOpen implements queue.Store.
func (s *Store) TicketCountOpen(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, ticketCountOpenSQL).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open tickets: %w", err)
	}
	return n, nil
}

// ticketResolveActionSQL gives a stale claim the outcome an operator
// found, if it is still in progress.
const ticketResolveActionSQL = `UPDATE actions SET state = $2, result = coalesce($3::json, result), error = coalesce($4, error), finished_at = $5
WHERE id = $1 AND state = 'in_progress'`

// TicketResolve implements queue.Store.
func (s *Store) TicketResolve(ctx context.Context, p queue.TicketResolveParams) (queue.TicketResolveResult, error) {
	t, err := s.TicketGetByID(ctx, p.TicketID)
	if err != nil {
		return queue.TicketResolveResult{}, err
	}
	var notOpen bool
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		// Lock order: the action first, then the ticket, as every other path.
		if _, err := tx.Exec(ctx, ticketLockActionSQL, t.ActionID); err != nil {
			return err
		}
		cur, err := scanTicket(tx.QueryRow(ctx, ticketLockSQL, p.TicketID))
		if err != nil {
			return err
		}
		if cur.State != queue.TicketOpen {
			notOpen, t = true, cur
			return nil
		}
		if cur.Kind == queue.TicketStale {
			var result, errText any
			if p.Outcome == queue.StateDone {
				result = jsonArg(p.Result)
			} else {
				errText = queue.OperatorError(p.Note)
			}
			// No row updated: the action finished meanwhile (a late report
			// that raced the sweep). The operator's finding is recorded
			// below and no state changes.
			tag, err := tx.Exec(ctx, ticketResolveActionSQL, t.ActionID, string(p.Outcome), result, errText, p.Now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				// The operator's finding moved the action: the same outcome
				// event as an agent's report (it notifies action.done/failed).
				if _, err := tx.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, $2, $3, 'dashboard', $4, $5)`,
					t.ActionID, queue.OutcomeEventKind(p.Outcome), p.By, p.Now, string(queue.TicketEventData(p.TicketID, cur.Kind, "", "", nil))); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE tickets SET state = 'resolved', resolved_at = $2, resolved_by = $3, outcome = $4, note = $5 WHERE id = $1`,
			p.TicketID, p.Now, p.By, string(p.Outcome), p.Note); err != nil {
			return err
		}
		data := queue.TicketEventData(p.TicketID, cur.Kind, p.Outcome, p.Note, p.Result)
		_, err = tx.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, 'ticket_resolved', $2, 'dashboard', $3, $4)`,
			t.ActionID, p.By, p.Now, string(data))
		return err
	})
	if err != nil {
		return queue.TicketResolveResult{}, fmt.Errorf("resolve ticket %s: %w", p.TicketID, err)
	}
	a, aerr := s.ActionGetByID(ctx, t.ActionID)
	if aerr != nil {
		return queue.TicketResolveResult{}, aerr
	}
	if notOpen {
		return queue.TicketResolveResult{Action: a, Ticket: t}, queue.ErrTicketNotOpen
	}
	t, err = s.TicketGetByID(ctx, p.TicketID)
	return queue.TicketResolveResult{Action: a, Ticket: t}, err
}
