package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

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
	q, args := actionTransitionSQL(p)
	v, err := s.transitions.call(ctx, &batchCall{order: "action:" + strings.ToLower(p.ID), sql: q, args: args,
		scan: func(row pgx.Row) (any, error) { return scanAction(row) }})
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

// actionTransitionSQL builds ActionTransition's statement: one conditional
// update that sets only the columns p sets and checks only the conditions
// p asks for, with its event and, for a late report, the resolution of the
// open stale ticket (the action's row is locked first, then the ticket's,
// as on every path). It returns the moved action with its current ticket,
// as actionGetByIDSQL would read it after the statement, or no row when
// nothing moved; testdata/action_transition.golden shows the variants.
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
    SELECT id, ` + arg(p.Event.Kind) + `, ` + arg(p.Event.Actor) + `, ` + arg(p.Event.Channel) + `, $3, ` + arg(jsonArg(p.Event.Data)) + `::json, ` + arg(p.Event.Unrouted) + ` FROM upd
)`)
	if p.ResolveStaleTicket {
		by := arg(p.Event.Actor)
		q.WriteString(`, tk AS (
    UPDATE tickets SET state = 'resolved', resolved_at = $3, resolved_by = ` + by + `, outcome = $2, note = ` + arg(queue.LateReportNote) + `
    WHERE action_id IN (SELECT id FROM upd) AND kind = 'stale' AND state = 'open'
    RETURNING *
), tkev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, 'ticket_resolved', ` + by + `, ` + arg(p.Event.Channel) + `, $3,
        json_build_object('ticket', id::text, 'kind', 'stale', 'outcome', $2::text, 'note', note) FROM tk
)`)
	}
	// The answer: the statement's snapshot holds the tickets as they were
	// before it, so a ticket it resolved comes from tk instead.
	tickets := "SELECT * FROM tickets t WHERE t.action_id = u.id"
	if p.ResolveStaleTicket {
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
