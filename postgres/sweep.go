package postgres

import (
	"context"
	"fmt"

	"github.com/approvals/approvals/queue"
)

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

// ActionRemindDue implements queue.Store.
func (s *Store) ActionRemindDue(ctx context.Context, p queue.DueParams) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, remindDueSQL, p.Now, p.Limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("remind due actions: %w", err)
	}
	return n, nil
}

// ActionEscalateDue implements queue.Store.
func (s *Store) ActionEscalateDue(ctx context.Context, p queue.DueParams) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, escalateDueSQL, p.Now, p.Limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("escalate due actions: %w", err)
	}
	return n, nil
}
