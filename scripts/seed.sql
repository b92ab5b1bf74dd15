-- Seed stored actions for read-side measurements (scripts/bench, docs/performance.md).
--
--   psql "$DATABASE_URL" -v from=1 -v to=1000000 -f scripts/seed.sql
--
-- Inserts rows number :from to :to into actions in the current schema (set
-- search_path, e.g. ?options=-csearch_path%3Dapp or PGOPTIONS). Every row
-- satisfies the CHECK constraints and unique indexes of
-- migrations/postgres/00001_init.sql; intent keys are 'seed:N', so seed
-- disjoint ranges to grow a table (1..100000, then 100001..1000000).
--
-- Mix, by N mod 100: 1% pending (10k of 1M), 1% approved, 1% rejected,
-- 7% expired, 1% cancelled (at-most-once); 29% done, 5% failed (exactly-once),
-- with 0.1% of N in_progress instead of done, one in 100 of those held past
-- its claim deadline (stale); 55% recorded (at-least-once). Row N was created
-- N seconds ago, so later ranges are older and the newest rows stay the same.
\set ON_ERROR_STOP on

BEGIN;
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, approved_payload, result,
    error, requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at,
    claimed_by, claim_deadline, finished_at, expires_at, has_webhook, spec, warnings)
SELECT gen_random_uuid(), t.tool, t.class, 'seed:' || g, 1, s.state, p.payload,
    CASE WHEN s.state = 'approved' THEN p.payload END,
    CASE WHEN s.state = 'done' THEN '{"ok": true}'::jsonb END,
    CASE WHEN s.state = 'failed' THEN 'seeded failure' END,
    'agent:seed', 'api',
    CASE WHEN s.state IN ('approved', 'rejected') THEN 'user:seed@example.com'
         WHEN s.state = 'expired' THEN 'system'
         WHEN s.state = 'cancelled' THEN 'agent:seed' END,
    CASE WHEN s.state = 'rejected' THEN 'seeded rejection' END,
    c.created_at,
    CASE WHEN s.state IN ('approved', 'rejected', 'expired', 'cancelled') THEN c.created_at + interval '1 minute' END,
    CASE WHEN t.class = 'exactly-once' THEN c.created_at END,
    CASE WHEN t.class = 'exactly-once' THEN 'agent:seed' END,
    CASE WHEN t.class = 'exactly-once' AND s.state = 'in_progress' AND g % 100000 = 11 THEN now() - interval '1 minute'
         WHEN t.class = 'exactly-once' AND s.state = 'in_progress' THEN now() + interval '2 minutes'
         WHEN t.class = 'exactly-once' THEN c.created_at + interval '2 minutes' END,
    CASE WHEN s.state NOT IN ('pending', 'approved', 'in_progress') THEN c.created_at + interval '2 minutes' END,
    CASE WHEN s.state IN ('pending', 'approved') THEN now() + interval '72 hours'
         WHEN t.class = 'at-most-once' THEN c.created_at + interval '72 hours' END,
    false, t.spec, '[]'::jsonb
FROM generate_series(:from::bigint, :to::bigint) AS g
CROSS JOIN LATERAL (SELECT now() - g * interval '1 second' AS created_at) c
CROSS JOIN LATERAL (SELECT CASE
        WHEN g % 100 = 0 THEN 'pending'
        WHEN g % 100 = 1 THEN 'approved'
        WHEN g % 100 = 2 THEN 'rejected'
        WHEN g % 100 BETWEEN 3 AND 9 THEN 'expired'
        WHEN g % 100 = 10 THEN 'cancelled'
        WHEN g % 1000 = 11 THEN 'in_progress'
        WHEN g % 100 BETWEEN 11 AND 39 THEN 'done'
        WHEN g % 100 BETWEEN 40 AND 44 THEN 'failed'
        ELSE 'recorded' END AS state) s
CROSS JOIN LATERAL (SELECT CASE
        WHEN s.state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled') THEN 'at-most-once'
        WHEN s.state = 'recorded' THEN 'at-least-once'
        ELSE 'exactly-once' END AS class) k
CROSS JOIN LATERAL (SELECT k.class,
        CASE k.class WHEN 'at-most-once' THEN 'send_customer_email'
                     WHEN 'exactly-once' THEN 'issue_refund'
                     ELSE 'invalidate_cache' END AS tool,
        jsonb_build_object('name', CASE k.class WHEN 'at-most-once' THEN 'send_customer_email'
                                                WHEN 'exactly-once' THEN 'issue_refund'
                                                ELSE 'invalidate_cache' END,
            'class', k.class, 'reason', 'seeded', 'registered', true,
            'claim_timeout', CASE k.class WHEN 'exactly-once' THEN 120000000000 ELSE 300000000000 END,
            'expires_after', 259200000000000, 'annotations', '{}'::jsonb) AS spec) t
CROSS JOIN LATERAL (SELECT jsonb_build_object('customer_id', g, 'topic', 'seed', 'to', 'customer' || g || '@example.com',
        'subject', 'Seeded action ' || g, 'body', 'Hello, this is seeded action number ' || g || '.') AS payload) p;
COMMIT;
-- What autovacuum would do shortly after a bulk load (statistics, and the
-- visibility map for index-only scans), done now so that the measurements
-- that follow see the steady state instead of racing the autovacuum workers
-- for the two cores.
VACUUM (ANALYZE) actions;
