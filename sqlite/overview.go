package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// The overview's statements, twins of postgres/overview.go, served
// by the indexes of migration 00010_overview_indexes.sql. Times are the
// fixed-width text of timeLayout: the first 13 characters name the UTC
// hour, and a duration is whole seconds from unixepoch plus the
// nanosecond digits, exact like PostgreSQL's interval.
const (
	sqlPendingByTool = `SELECT tool, count(*), min(created_at) FROM actions
WHERE state = 'pending' GROUP BY tool ORDER BY tool`

	sqlDecisionCount = `SELECT count(*) FROM actions
WHERE decided_at > ?1 AND decided_at <= ?2 AND decided_by LIKE 'user:%'`

	sqlDecisionTimes = `WITH t AS (
    SELECT tool,
           (unixepoch(substr(decided_at, 1, 19)) - unixepoch(substr(created_at, 1, 19))) * 1000000
             + (CAST(substr(decided_at, 21, 9) AS INTEGER) - CAST(substr(created_at, 21, 9) AS INTEGER)) / 1000 AS took
    FROM actions
    WHERE decided_at > ?1 AND decided_at <= ?2 AND decided_by LIKE 'user:%'
), d AS (
    SELECT tool, took,
           row_number() OVER (PARTITION BY tool ORDER BY took) AS rn,
           count(*) OVER (PARTITION BY tool) AS n
    FROM t
)
SELECT tool, n,
       max(CASE WHEN rn = (n + 1) / 2 THEN took END),
       max(CASE WHEN rn = (9 * n + 9) / 10 THEN took END)
FROM d GROUP BY tool, n ORDER BY tool`

	sqlHourly = `SELECT hour, sum(submitted), sum(decided) FROM (
    SELECT substr(created_at, 1, 13) AS hour, count(*) AS submitted, 0 AS decided
    FROM actions WHERE created_at >= ?1 AND created_at <= ?2 GROUP BY 1
    UNION ALL
    SELECT substr(decided_at, 1, 13), 0, count(*)
    FROM actions WHERE decided_at >= ?1 AND decided_at <= ?2 AND decided_by LIKE 'user:%' GROUP BY 1
) GROUP BY hour ORDER BY hour`

	sqlTicketResolutions = `WITH r AS (
    SELECT resolved_by LIKE 'verifier:%' AS verifier, resolved_by LIKE 'user:%' AS person,
           (unixepoch(substr(resolved_at, 1, 19)) - unixepoch(substr(opened_at, 1, 19))) * 1000000
             + (CAST(substr(resolved_at, 21, 9) AS INTEGER) - CAST(substr(opened_at, 21, 9) AS INTEGER)) / 1000 AS waited
    FROM tickets
    WHERE state = 'resolved' AND resolved_at > ?1 AND resolved_at <= ?2
), p AS (
    SELECT waited, row_number() OVER (ORDER BY waited) AS rn, count(*) OVER () AS n
    FROM r WHERE person
)
SELECT (SELECT count(*) FROM r WHERE verifier),
       (SELECT count(*) FROM p),
       coalesce((SELECT waited FROM p WHERE rn = (n + 1) / 2), 0),
       coalesce((SELECT waited FROM p WHERE rn = (9 * n + 9) / 10), 0)`
)

// ActionPendingByTool implements queue.Store.
func (s *Store) ActionPendingByTool(ctx context.Context) ([]queue.ToolPending, error) {
	rows, err := s.read.QueryContext(ctx, sqlPendingByTool)
	if err != nil {
		return nil, fmt.Errorf("pending by tool: %w", err)
	}
	defer rows.Close()
	var out []queue.ToolPending
	for rows.Next() {
		var p queue.ToolPending
		var oldest string
		if err := rows.Scan(&p.Tool, &p.Pending, &oldest); err != nil {
			return nil, fmt.Errorf("pending by tool: %w", err)
		}
		if p.Oldest, err = parseTime(oldest); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ActionDecisionCount implements queue.Store.
func (s *Store) ActionDecisionCount(ctx context.Context, p queue.PeriodParams) (int64, error) {
	var n int64
	if err := s.read.QueryRowContext(ctx, sqlDecisionCount, fmtTime(p.Since), fmtTime(p.Until)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count decisions: %w", err)
	}
	return n, nil
}

// ActionDecisionTimes implements queue.Store.
func (s *Store) ActionDecisionTimes(ctx context.Context, p queue.PeriodParams) ([]queue.ToolDecisionTimes, error) {
	rows, err := s.read.QueryContext(ctx, sqlDecisionTimes, fmtTime(p.Since), fmtTime(p.Until))
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
	rows, err := s.read.QueryContext(ctx, sqlHourly, fmtTime(p.Since), fmtTime(p.Until))
	if err != nil {
		return nil, fmt.Errorf("hourly counts: %w", err)
	}
	defer rows.Close()
	var out []queue.HourCount
	for rows.Next() {
		var h queue.HourCount
		var hour string
		if err := rows.Scan(&hour, &h.Submitted, &h.Decided); err != nil {
			return nil, fmt.Errorf("hourly counts: %w", err)
		}
		if h.Hour, err = time.Parse("2006-01-02T15", hour); err != nil {
			return nil, fmt.Errorf("hourly counts: stored hour %q: %w", hour, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// TicketResolutionStats implements queue.Store.
func (s *Store) TicketResolutionStats(ctx context.Context, p queue.PeriodParams) (queue.TicketResolutions, error) {
	var r queue.TicketResolutions
	var p50, p90 int64
	if err := s.read.QueryRowContext(ctx, sqlTicketResolutions, fmtTime(p.Since), fmtTime(p.Until)).Scan(&r.ByVerifier, &r.ByPerson, &p50, &p90); err != nil {
		return r, fmt.Errorf("ticket resolutions: %w", err)
	}
	r.WaitP50, r.WaitP90 = time.Duration(p50)*time.Microsecond, time.Duration(p90)*time.Microsecond
	return r, nil
}
