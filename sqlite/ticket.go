package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/queue"
)

const ticketColumns = `id, action_id, kind, state, opened_at, resolved_at, resolved_by, outcome, note`

func scanTicket(sc scanner) (*queue.Ticket, error) {
	var (
		t                                   queue.Ticket
		kind, state, openedAt               string
		resolvedAt, resolvedBy, outcome, nt sql.NullString
	)
	if err := sc.Scan(&t.ID, &t.ActionID, &kind, &state, &openedAt, &resolvedAt, &resolvedBy, &outcome, &nt); err != nil {
		return nil, err
	}
	t.Kind = queue.TicketKind(kind)
	t.State = queue.TicketState(state)
	var err error
	if t.OpenedAt, err = parseTime(openedAt); err != nil {
		return nil, err
	}
	if t.ResolvedAt, err = parseNullTime(resolvedAt); err != nil {
		return nil, err
	}
	t.ResolvedBy = ptrString(resolvedBy)
	if outcome.Valid {
		o := queue.State(outcome.String)
		t.Outcome = &o
	}
	t.Note = ptrString(nt)
	return &t, nil
}

func getTicket(ctx context.Context, q querier, id string) (*queue.Ticket, error) {
	t, err := scanTicket(q.QueryRowContext(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, queue.TicketNotFound(id)
	}
	return t, err
}

// attachTickets sets each action's Ticket: its open ticket if any, else its
// most recent one.
func attachTickets(ctx context.Context, q querier, list []*queue.Action) error {
	const chunk = 500 // well below SQLite's limit on bound parameters
	for start := 0; start < len(list); start += chunk {
		part := list[start:min(start+chunk, len(list))]
		byID := make(map[string]*queue.Action, len(part))
		args := make([]any, 0, len(part))
		for _, a := range part {
			a.Ticket = nil
			if _, dup := byID[a.ID]; !dup {
				byID[a.ID] = a
				args = append(args, a.ID)
			}
		}
		// The best ticket of each action comes first; later ones are skipped.
		rows, err := q.QueryContext(ctx, `SELECT `+ticketColumns+` FROM tickets
			WHERE action_id IN (`+placeholders(len(args))+`)
			ORDER BY action_id, state = 'open' DESC, opened_at DESC, id DESC`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			t, err := scanTicket(rows)
			if err != nil {
				rows.Close()
				return err
			}
			if a := byID[t.ActionID]; a != nil && a.Ticket == nil {
				a.Ticket = t
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Duplicates in list share the ticket of their first occurrence.
		for _, a := range part {
			if a.Ticket == nil {
				if first := byID[a.ID]; first != a {
					a.Ticket = first.Ticket
				}
			}
		}
	}
	return nil
}

// openTicket inserts an open ticket unless the action has one of that kind
// open already (the partial unique index tickets_one_open refuses it), and
// records ev (queue.TicketOpened) for a new one, as it is but for the
// ticket's id added to its data. It returns nil for none.
func openTicket(ctx context.Context, tx querier, actionID string, kind queue.TicketKind, now time.Time, ev queue.Event) (*queue.Ticket, error) {
	id := queue.NewID(now)
	n, err := rowsAffected(tx.ExecContext(ctx, `INSERT INTO tickets (id, action_id, kind, state, opened_at)
	VALUES (?, ?, ?, 'open', ?) ON CONFLICT DO NOTHING`, id, actionID, string(kind), fmtTime(now)))
	if err != nil {
		if isForeignKeyViolation(err) {
			return nil, queue.ActionNotFound(actionID)
		}
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
	VALUES (?, ?, ?, ?, ?, json_set(coalesce(?, '{}'), '$.ticket', ?), ?)`,
		actionID, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), id, boolInt(ev.Unrouted)); err != nil {
		return nil, err
	}
	return getTicket(ctx, tx, id)
}

// TicketOpenConflict records ev and opens a conflict ticket unless one is
// open; it returns the open conflict ticket either way.
func (s *Store) TicketOpenConflict(ctx context.Context, p queue.TicketOpenConflictParams) (*queue.Ticket, error) {
	actionID, now, ev := p.ActionID, p.Now, p.Event
	var t *queue.Ticket
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		ev.ActionID = actionID
		if ev.At.IsZero() {
			ev.At = now
		}
		if _, err := insertEvent(ctx, tx, ev); err != nil {
			return err
		}
		var err error
		if t, err = openTicket(ctx, tx, actionID, queue.TicketConflict, now, queue.TicketOpened(queue.TicketConflict, now)); err != nil || t != nil {
			return err
		}
		t, err = scanTicket(tx.QueryRowContext(ctx, `SELECT `+ticketColumns+` FROM tickets
			WHERE action_id = ? AND kind = 'conflict' AND state = 'open'`, actionID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open conflict ticket for action %s: %w", actionID, err)
	}
	return t, nil
}

// TicketGetByID returns one ticket.
func (s *Store) TicketGetByID(ctx context.Context, id string) (*queue.Ticket, error) {
	t, err := getTicket(ctx, s.read, id)
	if err != nil {
		return nil, fmt.Errorf("get ticket: %w", err)
	}
	return t, nil
}

// TicketList returns tickets matching p, oldest first.
func (s *Store) TicketList(ctx context.Context, p queue.TicketListParams) ([]*queue.Ticket, error) {
	var (
		where []string
		args  []any
	)
	if p.State != "" {
		where = append(where, `state = ?`)
		args = append(args, string(p.State))
	}
	if p.ActionID != "" {
		where = append(where, `action_id = ?`)
		args = append(args, p.ActionID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT ` + ticketColumns + ` FROM tickets`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY opened_at, id LIMIT ?`
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	defer rows.Close()
	var list []*queue.Ticket
	for rows.Next() {
		t, err := scanTicket(rows)
		if err != nil {
			return nil, fmt.Errorf("list tickets: %w", err)
		}
		list = append(list, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	return list, nil
}

// TicketCountOpen counts open tickets.
func (s *Store) TicketCountOpen(ctx context.Context) (int64, error) {
	var n int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM tickets WHERE state = 'open'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open tickets: %w", err)
	}
	return n, nil
}

// TicketResolve implements queue.Store: it writes the plan
// queue.PlanTicketResolution computes from the action and the ticket, read
// inside the immediate transaction that holds SQLite's write lock (the one
// lock order: the action, then the ticket), and announces a move.
func (s *Store) TicketResolve(ctx context.Context, p queue.TicketResolveParams) (queue.TicketResolveResult, error) {
	var (
		a       *queue.Action
		t       *queue.Ticket
		notOpen bool
		moved   bool
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		a, notOpen, moved = nil, false, false
		var err error
		if t, err = getTicket(ctx, tx, p.TicketID); err != nil {
			return err
		}
		if a, err = getActionWithTicket(ctx, tx, t.ActionID); err != nil {
			return err
		}
		plan, err := queue.PlanTicketResolution(a, t, p)
		if errors.Is(err, queue.ErrTicketNotOpen) {
			notOpen = true
			return nil
		}
		if err != nil {
			return err
		}
		if plan.Move != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE actions SET state = ?, result = COALESCE(?, result),
				error = COALESCE(?, error), finished_at = ?
			WHERE id = ? AND state = 'in_progress'`, string(plan.Move), nullJSON(plan.Result), plan.Error, fmtTime(p.Now), a.ID); err != nil {
				return err
			}
			moved = true
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tickets SET state = 'resolved', resolved_at = ?,
			resolved_by = ?, outcome = ?, note = ?
		WHERE id = ?`, fmtTime(p.Now), p.By, string(p.Outcome), p.Note, p.TicketID); err != nil {
			return err
		}
		for _, ev := range plan.Events {
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		if t, err = getTicket(ctx, tx, p.TicketID); err != nil {
			return err
		}
		a, err = getActionWithTicket(ctx, tx, t.ActionID)
		return err
	})
	if err != nil {
		return queue.TicketResolveResult{}, fmt.Errorf("resolve ticket %s: %w", p.TicketID, err)
	}
	if notOpen {
		return queue.TicketResolveResult{Action: a, Ticket: t}, fmt.Errorf("resolve ticket %s: it is %s: %w", t.ID, t.State, queue.ErrTicketNotOpen)
	}
	if moved {
		s.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
	}
	return queue.TicketResolveResult{Action: a, Ticket: t}, nil
}

// scanIDs reads a one-column result of ids and closes it.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return ids, rows.Err()
}

// TicketCheckDue implements queue.Store: the one writer makes the claim of
// a round and the scheduling of the next one a single step, so several
// processes never claim one round twice.
func (s *Store) TicketCheckDue(ctx context.Context, p queue.TicketCheckDueParams) ([]*queue.Ticket, error) {
	if len(p.Tools) == 0 {
		return nil, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var claimed []*queue.Ticket
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		claimed = nil
		now := fmtTime(p.Now)
		args := []any{now}
		for _, t := range p.Tools {
			args = append(args, t)
		}
		args = append(args, limit)
		rows, err := tx.QueryContext(ctx, `SELECT t.id, coalesce(c.checks, 0) FROM tickets t
		JOIN actions a ON a.id = t.action_id
		LEFT JOIN ticket_checks c ON c.ticket_id = t.id
		WHERE t.state = 'open' AND (c.ticket_id IS NULL OR (c.verdict = 'unknown' AND c.next_at <= ?1))
		  AND a.tool IN (`+strings.TrimSuffix(strings.Repeat("?,", len(p.Tools)), ",")+`)
		ORDER BY coalesce(c.next_at, t.opened_at), t.id LIMIT ?`, args...)
		if err != nil {
			return err
		}
		type due struct {
			id     string
			checks int
		}
		var list []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.checks); err != nil {
				rows.Close()
				return err
			}
			list = append(list, d)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, d := range list {
			next := fmtTime(p.Now.Add(queue.VerifyNextDelay(d.checks + 1)))
			if _, err := tx.ExecContext(ctx, `INSERT INTO ticket_checks (ticket_id, checks, next_at) VALUES (?, ?, ?)
			ON CONFLICT (ticket_id) DO UPDATE SET checks = excluded.checks, next_at = excluded.next_at`,
				d.id, d.checks+1, next); err != nil {
				return err
			}
			t, err := getTicket(ctx, tx, d.id)
			if err != nil {
				return err
			}
			claimed = append(claimed, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim verifier rounds: %w", err)
	}
	return claimed, nil
}

// TicketCheckGet implements queue.Reader.
func (s *Store) TicketCheckGet(ctx context.Context, id string) (queue.TicketCheck, error) {
	var c queue.TicketCheck
	var next string
	err := s.read.QueryRowContext(ctx, `SELECT checks, next_at, verdict FROM ticket_checks WHERE ticket_id = ?`, id).
		Scan(&c.Checks, &next, &c.Verdict)
	if errors.Is(err, sql.ErrNoRows) {
		return c, queue.ErrNotFound
	}
	if err == nil {
		c.NextAt, err = parseTime(next)
	}
	if err != nil {
		return c, fmt.Errorf("get the verifier schedule of ticket %s: %w", id, err)
	}
	return c, nil
}

// TicketCheckRecord implements queue.Store.
func (s *Store) TicketCheckRecord(ctx context.Context, p queue.TicketCheckRecordParams) error {
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		if _, err := insertEvent(ctx, tx, p.Event); err != nil {
			return err
		}
		if p.TicketID == "" {
			return nil
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO ticket_checks (ticket_id, next_at, verdict) VALUES (?, ?, ?)
		ON CONFLICT (ticket_id) DO UPDATE SET verdict = excluded.verdict`, p.TicketID, fmtTime(p.Event.At), p.Verdict)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the verifier's check of %s: %w", p.Event.ActionID, err)
	}
	return nil
}

// VerifySlotTake implements queue.Store: the one writer makes the test of
// when the slot was last taken and its taking a single step.
func (s *Store) VerifySlotTake(ctx context.Context, p queue.VerifySlotTakeParams) (queue.VerifySlot, error) {
	var slot queue.VerifySlot
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		slot = queue.VerifySlot{}
		var at string
		err := tx.QueryRowContext(ctx, `INSERT INTO verify_slots AS v (action_id, asked_at) VALUES (?1, ?2)
		ON CONFLICT (action_id) DO UPDATE SET asked_at = excluded.asked_at WHERE v.asked_at <= ?3
		RETURNING asked_at`, p.ActionID, fmtTime(p.Now), fmtTime(p.Now.Add(-p.Interval))).Scan(&at)
		switch {
		case err == nil:
			slot.Taken = true
		case isForeignKeyViolation(err):
			return queue.ActionNotFound(p.ActionID)
		case errors.Is(err, sql.ErrNoRows):
			// Held: when it was taken says when it frees.
			err = tx.QueryRowContext(ctx, `SELECT asked_at FROM verify_slots WHERE action_id = ?`, p.ActionID).Scan(&at)
		}
		if err != nil {
			return err
		}
		slot.AskedAt, err = parseTime(at)
		return err
	})
	if err != nil {
		return queue.VerifySlot{}, fmt.Errorf("take the verifier slot of %s: %w", p.ActionID, err)
	}
	return slot, nil
}
