package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// The overview's statements are in sql/overview.sql.

// ActionPendingByTool implements queue.Store.
func (s *Store) ActionPendingByTool(ctx context.Context) ([]queue.ToolPending, error) {
	rows, err := s.pool.Query(ctx, sqlPendingByTool)
	if err != nil {
		return nil, fmt.Errorf("pending by tool: %w", err)
	}
	defer rows.Close()
	var out []queue.ToolPending
	for rows.Next() {
		var p queue.ToolPending
		if err := rows.Scan(&p.Tool, &p.Pending, &p.Oldest); err != nil {
			return nil, fmt.Errorf("pending by tool: %w", err)
		}
		p.Oldest = p.Oldest.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// ActionDecisionCount implements queue.Store.
func (s *Store) ActionDecisionCount(ctx context.Context, p queue.PeriodParams) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlDecisionCount, p.Since, p.Until).Scan(&n); err != nil {
		return 0, fmt.Errorf("count decisions: %w", err)
	}
	return n, nil
}

// ActionDecisionTimes implements queue.Store.
func (s *Store) ActionDecisionTimes(ctx context.Context, p queue.PeriodParams) ([]queue.ToolDecisionTimes, error) {
	rows, err := s.pool.Query(ctx, sqlDecisionTimes, p.Since, p.Until)
	if err != nil {
		return nil, fmt.Errorf("decision times: %w", err)
	}
	defer rows.Close()
	var out []queue.ToolDecisionTimes
	for rows.Next() {
		var d queue.ToolDecisionTimes
		var p50, p90 int64
		if err := rows.Scan(&d.Tool, &d.Decisions, &p50, &p90); err != nil {
			return nil, fmt.Errorf("decision times: %w", err)
		}
		d.P50, d.P90 = time.Duration(p50)*time.Microsecond, time.Duration(p90)*time.Microsecond
		out = append(out, d)
	}
	return out, rows.Err()
}

// ActionHourly implements queue.Store.
func (s *Store) ActionHourly(ctx context.Context, p queue.PeriodParams) ([]queue.HourCount, error) {
	rows, err := s.pool.Query(ctx, sqlHourly, p.Since, p.Until)
	if err != nil {
		return nil, fmt.Errorf("hourly counts: %w", err)
	}
	defer rows.Close()
	var out []queue.HourCount
	for rows.Next() {
		var h queue.HourCount
		if err := rows.Scan(&h.Hour, &h.Submitted, &h.Decided); err != nil {
			return nil, fmt.Errorf("hourly counts: %w", err)
		}
		h.Hour = h.Hour.UTC()
		out = append(out, h)
	}
	return out, rows.Err()
}

// TicketResolutionStats implements queue.Store.
func (s *Store) TicketResolutionStats(ctx context.Context, p queue.PeriodParams) (queue.TicketResolutions, error) {
	var r queue.TicketResolutions
	var p50, p90 int64
	if err := s.pool.QueryRow(ctx, sqlTicketResolutions, p.Since, p.Until).Scan(&r.ByVerifier, &r.ByPerson, &p50, &p90); err != nil {
		return r, fmt.Errorf("ticket resolutions: %w", err)
	}
	r.WaitP50, r.WaitP90 = time.Duration(p50)*time.Microsecond, time.Duration(p90)*time.Microsecond
	return r, nil
}
