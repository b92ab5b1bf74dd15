package postgres

import (
	"context"
	"fmt"

	"github.com/approvals/approvals/queue"
)

// ActionExpireDue implements queue.Store.
func (s *Store) ActionExpireDue(ctx context.Context, p queue.DueParams) ([]*queue.Action, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("expire due actions: %w", queue.ErrNoEvent)
	}
	rows, err := s.pool.Query(ctx, actionExpireDueSQL, dueArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	out, err := collectActions(rows)
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	return out, nil
}

// TicketOpenStale implements queue.Store.
func (s *Store) TicketOpenStale(ctx context.Context, p queue.DueParams) ([]*queue.Ticket, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("open stale tickets: %w", queue.ErrNoEvent)
	}
	rows, err := s.pool.Query(ctx, ticketOpenStaleSQL, dueArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("open stale tickets: %w", err)
	}
	out, err := collectTickets(rows)
	if err != nil {
		return nil, fmt.Errorf("open stale tickets: %w", err)
	}
	return out, nil
}

// ActionRemindDue implements queue.Store.
func (s *Store) ActionRemindDue(ctx context.Context, p queue.DueParams) (int, error) {
	if p.Event.Kind == "" {
		return 0, fmt.Errorf("remind due actions: %w", queue.ErrNoEvent)
	}
	var n int
	if err := s.pool.QueryRow(ctx, remindDueSQL, dueArgs(p)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("remind due actions: %w", err)
	}
	return n, nil
}

// ActionEscalateDue implements queue.Store.
func (s *Store) ActionEscalateDue(ctx context.Context, p queue.DueParams) (int, error) {
	if p.Event.Kind == "" {
		return 0, fmt.Errorf("escalate due actions: %w", queue.ErrNoEvent)
	}
	var n int
	if err := s.pool.QueryRow(ctx, escalateDueSQL, dueArgs(p)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("escalate due actions: %w", err)
	}
	return n, nil
}

// dueArgs are the parameters of the sweep's statements and planExpireDueSQL:
// what is due ($1 now, $2 limit) and the event the domain gave for each ($3
// kind, $4 actor, $5 channel, $6 at, $7 data).
func dueArgs(p queue.DueParams) []any {
	ev := p.Event
	return []any{p.Now, p.Limit, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)}
}
