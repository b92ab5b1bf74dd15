package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// The overview's statements. Each is served by an index (migration
// 00010_overview_indexes.sql); TestOverviewUsesIndexes checks the plans.
// A decision is one a person made: decided_by 'user:…'.
const (
	sqlPendingByTool = `SELECT tool, count(*), min(created_at) FROM actions
WHERE state = 'pending' GROUP BY tool ORDER BY tool`

	sqlDecisionCount = `SELECT count(*) FROM actions
WHERE decided_at > $1 AND decided_at <= $2 AND decided_by LIKE 'user:%'`

	// Nearest rank with integer arithmetic, the same in both stores:
	// percentile_disc computes its rank in floating point (0.9 * 70 is
	// 63.000000000000007, so rank 64).
	sqlDecisionTimes = `WITH d AS (
    SELECT tool, decided_at - created_at AS took,
           row_number() OVER (PARTITION BY tool ORDER BY decided_at - created_at) AS rn,
           count(*) OVER (PARTITION BY tool) AS n
    FROM actions
    WHERE decided_at > $1 AND decided_at <= $2 AND decided_by LIKE 'user:%'
)
SELECT tool, n,
       (extract(epoch FROM max(took) FILTER (WHERE rn = (n + 1) / 2)) * 1000000)::bigint,
       (extract(epoch FROM max(took) FILTER (WHERE rn = (9 * n + 9) / 10)) * 1000000)::bigint
FROM d GROUP BY tool, n ORDER BY tool`

	sqlHourly = `SELECT hour, sum(submitted)::bigint, sum(decided)::bigint FROM (
    SELECT date_trunc('hour', created_at, 'UTC') AS hour, count(*) AS submitted, 0 AS decided
    FROM actions WHERE created_at >= $1 AND created_at <= $2 GROUP BY 1
    UNION ALL
    SELECT date_trunc('hour', decided_at, 'UTC'), 0, count(*)
    FROM actions WHERE decided_at >= $1 AND decided_at <= $2 AND decided_by LIKE 'user:%' GROUP BY 1
) h GROUP BY hour ORDER BY hour`
)

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
