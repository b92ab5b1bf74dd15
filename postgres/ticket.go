package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

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
		if _, err := tx.Exec(ctx, eventInsertSQL, actionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)); err != nil {
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
		opened := queue.TicketOpened(queue.TicketConflict, now)
		_, err = tx.Exec(ctx, ticketOpenedEventSQL, actionID, opened.Kind, opened.Actor, opened.Channel, opened.At, jsonArg(opened.Data), t.ID)
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

// TicketCountOpen implements queue.Store.
func (s *Store) TicketCountOpen(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, ticketCountOpenSQL).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open tickets: %w", err)
	}
	return n, nil
}

// TicketResolve implements queue.Store: it writes the plan
// queue.PlanTicketResolution computes from the locked action and ticket.
// The trigger on actions announces a move (NOTIFY).
func (s *Store) TicketResolve(ctx context.Context, p queue.TicketResolveParams) (queue.TicketResolveResult, error) {
	t, err := s.TicketGetByID(ctx, p.TicketID)
	if err != nil {
		return queue.TicketResolveResult{}, err
	}
	var notOpen bool
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		notOpen = false
		// Lock order: the action first, then the ticket, as every other path.
		a, err := scanAction(tx.QueryRow(ctx, ticketActionLockSQL, t.ActionID))
		if err != nil {
			return err
		}
		cur, err := scanTicket(tx.QueryRow(ctx, ticketLockSQL, p.TicketID))
		if err != nil {
			return err
		}
		plan, err := queue.PlanTicketResolution(a, cur, p)
		if errors.Is(err, queue.ErrTicketNotOpen) {
			notOpen, t = true, cur
			return nil
		}
		if err != nil {
			return err
		}
		if plan.Move != "" {
			if _, err := tx.Exec(ctx, ticketResolveActionSQL, a.ID, string(plan.Move), jsonArg(plan.Result), plan.Error, p.Now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, ticketResolveSQL, p.TicketID, p.Now, p.By, string(p.Outcome), p.Note); err != nil {
			return err
		}
		for _, ev := range plan.Events {
			if _, err := tx.Exec(ctx, eventInsertSQL, ev.ActionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)); err != nil {
				return err
			}
		}
		return nil
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

// TicketCheckDue implements queue.Store.
func (s *Store) TicketCheckDue(ctx context.Context, p queue.TicketCheckDueParams) ([]*queue.Ticket, error) {
	if len(p.Tools) == 0 {
		return nil, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, ticketCheckDueSQL, p.Now, p.Tools, limit)
	if err != nil {
		return nil, fmt.Errorf("claim verifier rounds: %w", err)
	}
	out, err := collectTickets(rows)
	if err != nil {
		return nil, fmt.Errorf("claim verifier rounds: %w", err)
	}
	return out, nil
}

// TicketCheckGet implements queue.Reader.
func (s *Store) TicketCheckGet(ctx context.Context, id string) (queue.TicketCheck, error) {
	var c queue.TicketCheck
	if !queue.ValidID(id) {
		return c, queue.ErrNotFound
	}
	err := s.pool.QueryRow(ctx, ticketCheckGetSQL, id).Scan(&c.Checks, &c.NextAt, &c.Verdict)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, queue.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("get the verifier schedule of ticket %s: %w", id, err)
	}
	c.NextAt = c.NextAt.UTC()
	return c, nil
}

// TicketCheckRecord implements queue.Store.
func (s *Store) TicketCheckRecord(ctx context.Context, p queue.TicketCheckRecordParams) error {
	ev := p.Event
	if !queue.ValidID(ev.ActionID) {
		return queue.ActionNotFound(ev.ActionID)
	}
	var appended int
	err := s.pool.QueryRow(ctx, ticketCheckRecordSQL, ev.ActionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data),
		p.TicketID, p.Verdict).Scan(&appended)
	if isForeignKeyViolation(err) || err == nil && appended == 0 {
		// No such action, or (the ticket's key) no such ticket.
		return queue.ActionNotFound(ev.ActionID)
	}
	if err != nil {
		return fmt.Errorf("record the verifier's check of %s: %w", ev.ActionID, err)
	}
	return nil
}

// VerifySlotTake implements queue.Store.
func (s *Store) VerifySlotTake(ctx context.Context, p queue.VerifySlotTakeParams) (queue.VerifySlot, error) {
	if !queue.ValidID(p.ActionID) {
		return queue.VerifySlot{}, queue.ActionNotFound(p.ActionID)
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, verifySlotTakeSQL, p.ActionID, p.Now, p.Now.Add(-p.Interval)).Scan(&at)
	if err == nil {
		return queue.VerifySlot{Taken: true, AskedAt: at.UTC()}, nil
	}
	if isForeignKeyViolation(err) {
		return queue.VerifySlot{}, queue.ActionNotFound(p.ActionID)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return queue.VerifySlot{}, fmt.Errorf("take the verifier slot of %s: %w", p.ActionID, err)
	}
	// Held: when it was taken says when it frees.
	if err := s.pool.QueryRow(ctx, verifySlotGetSQL, p.ActionID).Scan(&at); err != nil {
		return queue.VerifySlot{}, fmt.Errorf("read the verifier slot of %s: %w", p.ActionID, err)
	}
	return queue.VerifySlot{AskedAt: at.UTC()}, nil
}
