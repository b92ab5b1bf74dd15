-- The overview's statements. Each is served by an index (migration
-- 00010_overview_indexes.sql); TestOverviewUsesIndexes checks the plans.
-- A decision is one a person made: decided_by 'user:…'.

-- name: sqlPendingByTool
SELECT tool, count(*), min(created_at) FROM actions
WHERE state = 'pending' GROUP BY tool ORDER BY tool;

-- name: sqlDecisionCount
SELECT count(*) FROM actions
WHERE decided_at > $1 AND decided_at <= $2 AND decided_by LIKE 'user:%';

-- name: sqlDecisionTimes
-- sqlDecisionTimes uses the nearest rank with integer arithmetic, the same
-- in both stores: percentile_disc computes its rank in floating point
-- (0.9 * 70 is 63.000000000000007, so rank 64).
WITH d AS (
    SELECT tool, decided_at - created_at AS took,
           row_number() OVER (PARTITION BY tool ORDER BY decided_at - created_at) AS rn,
           count(*) OVER (PARTITION BY tool) AS n
    FROM actions
    WHERE decided_at > $1 AND decided_at <= $2 AND decided_by LIKE 'user:%'
)
SELECT tool, n,
       (extract(epoch FROM max(took) FILTER (WHERE rn = (n + 1) / 2)) * 1000000)::bigint,
       (extract(epoch FROM max(took) FILTER (WHERE rn = (9 * n + 9) / 10)) * 1000000)::bigint
FROM d GROUP BY tool, n ORDER BY tool;

-- name: sqlHourly
SELECT hour, sum(submitted)::bigint, sum(decided)::bigint FROM (
    SELECT date_trunc('hour', created_at, 'UTC') AS hour, count(*) AS submitted, 0 AS decided
    FROM actions WHERE created_at >= $1 AND created_at <= $2 GROUP BY 1
    UNION ALL
    SELECT date_trunc('hour', decided_at, 'UTC'), 0, count(*)
    FROM actions WHERE decided_at >= $1 AND decided_at <= $2 AND decided_by LIKE 'user:%' GROUP BY 1
) h GROUP BY hour ORDER BY hour;

-- name: sqlTicketResolutions
-- sqlTicketResolutions counts a window's resolved tickets by a verifier
-- and by a person, with the nearest ranks of a person's wait from the
-- ticket's opening, as sqlDecisionTimes computes them. It reads the index
-- tickets_resolved (migration 00026).
WITH r AS (
    SELECT resolved_by LIKE 'verifier:%' AS verifier, resolved_by LIKE 'user:%' AS person,
           resolved_at - opened_at AS waited
    FROM tickets
    WHERE state = 'resolved' AND resolved_at > $1 AND resolved_at <= $2
), p AS (
    SELECT waited, row_number() OVER (ORDER BY waited) AS rn, count(*) OVER () AS n
    FROM r WHERE person
)
SELECT (SELECT count(*) FROM r WHERE verifier),
       (SELECT count(*) FROM p),
       coalesce((SELECT (extract(epoch FROM waited) * 1000000)::bigint FROM p WHERE rn = (n + 1) / 2), 0),
       coalesce((SELECT (extract(epoch FROM waited) * 1000000)::bigint FROM p WHERE rn = (9 * n + 9) / 10), 0);
