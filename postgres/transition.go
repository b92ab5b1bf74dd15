package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// ActionTransition implements queue.Store. The update, its event, the
// late-report ticket resolution and the answer (the moved action with its
// ticket) are one statement, sent through the transitions' batcher, so
// concurrent transitions (completions, failures, claims, cancels) share one
// commit and one WAL flush, as submissions do; the caller hears of its
// transition only after that commit. A transition that moved nothing
// (another state, another agent, a revoked token) reads the action after
// the commit, as any read would, to say why.
func (s *Store) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if !queue.ValidID(p.ID) {
		return nil, queue.ActionNotFound(p.ID)
	}
	c := &batchCall{order: "action:" + strings.ToLower(p.ID), scan: scanTransitioned}
	if reportable(p) && s.reports.on(s.pool) {
		// Its own statement is built only if it goes alone.
		c.kind, c.arg, c.statement = reports{}, p, func() (string, []any) { return actionTransitionSQL(p) }
	} else {
		c.sql, c.args = actionTransitionSQL(p)
	}
	v, err := s.transitions.call(ctx, c)
	if err == nil {
		return v.(*queue.Action), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("transition %s to %s: %w", p.ID, p.To, err)
	}
	// Nothing moved.
	if p.TokenHash != "" {
		if _, err := s.TokenGetByHash(ctx, p.TokenHash); errors.Is(err, accounts.ErrNotFound) {
			// The caller may not see the action.
			return nil, queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
		} else if err != nil {
			return nil, fmt.Errorf("transition %s to %s: check token: %w", p.ID, p.To, err)
		}
	}
	a, err := scanAction(s.pool.QueryRow(ctx, actionGetByIDSQL, p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.ActionNotFound(p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("transition %s to %s: read it: %w", p.ID, p.To, err)
	}
	return a, fmt.Errorf("transition %s to %s from %s: %w", p.ID, p.To, a.State, queue.ErrStateMismatch)
}

func scanTransitioned(row pgx.Row) (any, error) { return scanAction(row) }

// reportable reports whether p is an agent's report that reportManySQL
// merges with the others of its batch: a complete or a fail of the agent's
// own claim (the transitions Service.Complete and Service.Fail make), which
// sets nothing else. Every other transition runs as a statement of its
// own, and so does a report with any field set that reportManySQL does not
// know, should one be added.
func reportable(p queue.ActionTransitionParams) bool {
	switch {
	case p.To != queue.StateDone && p.To != queue.StateFailed,
		len(p.From) != 1 || p.From[0] != queue.StateInProgress,
		p.RequestedBy == "" || !p.AgentExecuted || p.ResolveStale == nil,
		p.FinishedAt == nil || !p.FinishedAt.Equal(p.Now),
		(p.Result == nil) == (p.Error == nil),
		p.Event.ActionID != p.ID:
		return false
	}
	rest := p
	rest.ID, rest.From, rest.To, rest.Now, rest.RequestedBy, rest.AgentExecuted, rest.ResolveStale = "", nil, "", time.Time{}, "", false, nil
	rest.FinishedAt, rest.Result, rest.Error, rest.TokenHash = nil, nil, nil, ""
	// The event's time is the transition's, as in actionTransitionSQL.
	rest.Event.ActionID, rest.Event.Kind, rest.Event.Actor, rest.Event.Channel, rest.Event.Data, rest.Event.Unrouted, rest.Event.At = "", "", "", "", nil, false, time.Time{}
	// The resolution's fields are carried one array each.
	r := *p.ResolveStale
	r.By, r.At, r.Channel, r.Outcome, r.Note, r.Data = "", time.Time{}, "", "", "", nil
	return reflect.DeepEqual(rest, queue.ActionTransitionParams{}) && reflect.DeepEqual(r, queue.StaleResolution{})
}

// reportMerging decides whether reports are merged: only once the
// planner's statistics count at least mergeReportsAbove actions. The merged
// statement joins its input with actions, and each batch connection keeps
// the generic plan it made first; planned on a table the statistics call
// empty or have never seen (a new database, or one analyzed while nearly
// empty), that join reads actions whole and keeps doing so as the table
// grows, until the next ANALYZE. With statistics of a table of some size
// the planner probes the primary key for each report
// (TestReportsMergeOnlyWithStatistics), and a plan made then stays right as
// the table grows. Single statements probe the key whatever the statistics
// say. The count is read again at most every reportStatsEvery, in the
// background, by the first caller that finds it stale; until the first
// read, and whenever a read counts fewer, reports run one by one.
type reportMerging struct {
	merge   atomic.Bool
	checked atomic.Int64 // unix nanoseconds of the last read; 0: never
	reading atomic.Bool
	forceOn atomic.Bool // tests
}

const (
	mergeReportsAbove = 10_000
	reportStatsEvery  = 30 * time.Second
)

func (m *reportMerging) on(pool *pgxpool.Pool) bool {
	if m.forceOn.Load() {
		return true
	}
	if now := time.Now().UnixNano(); now-m.checked.Load() > int64(reportStatsEvery) && m.reading.CompareAndSwap(false, true) {
		m.checked.Store(now)
		go func() {
			defer m.reading.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var rows float64
			// reltuples is -1 before the first ANALYZE.
			if err := pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'actions'::regclass`).Scan(&rows); err == nil {
				m.merge.Store(rows >= mergeReportsAbove)
			}
		}()
	}
	return m.merge.Load()
}

// reports merges the agents' reports of a batch (reportable).
type reports struct{}

func (reports) merge(calls []*batchCall) (string, []any) {
	n := len(calls)
	str, strp := cutter[string]{make([]string, 10*n), n}, cutter[*string]{make([]*string, 5*n), n}
	var (
		ids, states, requestedBy, kinds, actors, channels = str.next(), str.next(), str.next(), str.next(), str.next(), str.next()
		results, errs, tokens, data                       = strp.next(), strp.next(), strp.next(), strp.next()
		ats, unrouted                                     = make([]time.Time, n), make([]bool, n)
		// The stale ticket's resolution (reportable: every report has one).
		tkBy, tkChannels, tkOutcomes, tkNotes = str.next(), str.next(), str.next(), str.next()
		tkAts, tkData                         = make([]time.Time, n), strp.next()
	)
	for i, c := range calls {
		p := c.arg.(queue.ActionTransitionParams)
		ids[i], states[i], ats[i], requestedBy[i] = p.ID, string(p.To), p.Now, p.RequestedBy
		if p.Result != nil {
			r := string(p.Result)
			results[i] = &r
		}
		errs[i] = p.Error
		if p.TokenHash != "" {
			tokens[i] = &p.TokenHash
		}
		ev := p.Event
		kinds[i], actors[i], channels[i], unrouted[i] = ev.Kind, ev.Actor, ev.Channel, ev.Unrouted
		if ev.Data != nil {
			d := string(ev.Data)
			data[i] = &d
		}
		r := p.ResolveStale
		tkBy[i], tkAts[i], tkChannels[i], tkOutcomes[i], tkNotes[i] = r.By, r.At, r.Channel, string(r.Outcome), r.Note
		if r.Data != nil {
			d := string(r.Data)
			tkData[i] = &d
		}
	}
	return reportManySQL, []any{uuidArray(ids), states, ats, results, errs, requestedBy, tokens, kinds, actors,
		channels, data, unrouted, tkBy, tkAts, tkChannels, tkOutcomes, tkNotes, tkData,
		[]string{string(queue.StateInProgress)}}
}

// actionTransitionSQL builds ActionTransition's statement: one conditional
// update that sets only the columns p sets and checks only the conditions
// p asks for, with its event and, for a late report, the resolution of the
// open stale ticket (the action's row is locked first, then the ticket's,
// as on every path). It returns the moved action with its current ticket,
// as actionGetByIDSQL would read it after the statement, or no row when
// nothing moved; testdata/action_transition.golden shows the variants.
// reportManySQL does the same for the reports it merges (reportable): a
// change to one is a change to the other, which TestMergedReports holds
// equal.
func actionTransitionSQL(p queue.ActionTransitionParams) (string, []any) {
	args := sqlArgs{p.ID, string(p.To), p.Now}
	arg := args.add
	var q strings.Builder
	q.WriteString("WITH upd AS (\n    UPDATE actions SET state = $2")
	set := func(col string, v any) { q.WriteString(", " + col + " = " + arg(v)) }
	if p.DecidedBy != nil {
		set("decided_by", *p.DecidedBy)
	}
	if p.DecisionNote != nil {
		set("decision_note", *p.DecisionNote)
	}
	if p.DecidedAt != nil {
		set("decided_at", *p.DecidedAt)
	}
	if p.ApprovedPayload != nil {
		set("approved_payload", string(p.ApprovedPayload))
	}
	if p.Result != nil {
		set("result", string(p.Result))
	}
	if p.Error != nil {
		set("error", *p.Error)
	}
	if p.ClaimedAt != nil {
		set("claimed_at", *p.ClaimedAt)
	}
	if p.ClaimedBy != nil {
		set("claimed_by", *p.ClaimedBy)
	}
	if p.ClaimDeadline != nil {
		set("claim_deadline", *p.ClaimDeadline)
	}
	if p.FinishedAt != nil {
		set("finished_at", *p.FinishedAt)
	}
	if p.ExpiresAt != nil {
		set("expires_at", *p.ExpiresAt)
	}
	from := make([]string, len(p.From))
	for i, st := range p.From {
		from[i] = string(st)
	}
	q.WriteString("\n    WHERE id = $1 AND state = ANY(" + arg(from) + ")")
	if p.Unexpired {
		q.WriteString(" AND (expires_at IS NULL OR expires_at > $3)")
	}
	if p.RequestedBy != "" {
		q.WriteString(" AND requested_by = " + arg(p.RequestedBy))
	}
	if p.AgentExecuted {
		q.WriteString(" AND NOT has_webhook")
	}
	if p.TokenHash != "" {
		// tok.token_hash stays qualified, or it would compare the column
		// with itself.
		q.WriteString(" AND EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = " + arg(p.TokenHash) + " AND tok.revoked_at IS NULL)")
	}
	q.WriteString(`
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT id, ` + arg(p.Event.Kind) + `, ` + arg(p.Event.Actor) + `, ` + arg(p.Event.Channel) + `, $3, ` + arg(jsonArg(p.Event.Data)) + `::json, ` + arg(p.Event.Unrouted) + ` FROM upd`)
	if r := p.ResolveStale; r != nil {
		// The resolution as the domain gave it (queue.LateResolution), its
		// event's data with the ticket's id added. tkev reads ev, so that
		// the outcome event is written first.
		by, at := arg(r.By), arg(r.At)
		q.WriteString(`
    RETURNING action_id
), tk AS (
    UPDATE tickets SET state = 'resolved', resolved_at = ` + at + `, resolved_by = ` + by + `, outcome = ` + arg(string(r.Outcome)) + `, note = ` + arg(r.Note) + `
    WHERE action_id IN (SELECT id FROM upd) AND kind = 'stale' AND state = 'open'
    RETURNING *
), tkev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT tk.action_id, 'ticket_resolved', ` + by + `, ` + arg(r.Channel) + `, ` + at + `,
        (jsonb_build_object('ticket', tk.id::text) || coalesce(` + arg(jsonArg(r.Data)) + `::jsonb, '{}'))::json
    FROM tk JOIN ev ON ev.action_id = tk.action_id`)
	}
	q.WriteString("\n)")
	// The answer: the statement's snapshot holds the tickets as they were
	// before it, so a ticket it resolved comes from tk instead.
	tickets := "SELECT * FROM tickets t WHERE t.action_id = u.id"
	if p.ResolveStale != nil {
		tickets = "SELECT * FROM (SELECT * FROM tickets t WHERE t.action_id = u.id AND t.id NOT IN (SELECT id FROM tk)\n        UNION ALL SELECT * FROM tk) t"
	}
	q.WriteString(`
SELECT ` + movedColumns + `,
    ` + ticketColumns + `
FROM upd u
LEFT JOIN LATERAL (
    ` + tickets + `
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true`)
	return q.String(), args
}
