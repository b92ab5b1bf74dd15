package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// ActionTransition moves one action in one conditional update.
func (s *Store) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if len(p.From) == 0 || !p.To.Valid() {
		return nil, fmt.Errorf("transition action %s: from %v to %q is not a transition", p.ID, p.From, p.To)
	}
	if p.TokenHash != "" {
		// SupportsTokenGuard is false: the caller must look the token up.
		return nil, fmt.Errorf("transition action %s: this store cannot check an agent token in the transition", p.ID)
	}
	var resolvedAt *time.Time
	if p.ResolveStale != nil {
		resolvedAt = &p.ResolveStale.At
	}
	if err := storableTimes(p.DecidedAt, p.ClaimedAt, p.FinishedAt, p.ExpiresAt, resolvedAt); err != nil {
		return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
	}
	args := []any{string(p.To),
		nullString(p.DecidedBy), nullString(p.DecisionNote), nullTime(p.DecidedAt),
		nullJSON(p.ApprovedPayload), nullJSON(p.Result), nullString(p.Error),
		nullTime(p.ClaimedAt), nullString(p.ClaimedBy), nullTime(p.ClaimDeadline),
		nullTime(p.FinishedAt), nullTime(p.ExpiresAt), p.ID}
	for _, f := range p.From {
		args = append(args, string(f))
	}
	query := `UPDATE actions SET state = ?,
		decided_by = COALESCE(?, decided_by), decision_note = COALESCE(?, decision_note),
		decided_at = COALESCE(?, decided_at), approved_payload = COALESCE(?, approved_payload),
		result = COALESCE(?, result), error = COALESCE(?, error),
		claimed_at = COALESCE(?, claimed_at), claimed_by = COALESCE(?, claimed_by),
		claim_deadline = COALESCE(?, claim_deadline), finished_at = COALESCE(?, finished_at),
		expires_at = COALESCE(?, expires_at)
	WHERE id = ? AND state IN (` + placeholders(len(p.From)) + `)`
	if p.Unexpired {
		// After expires_at an approval can no longer be given, whether or
		// not the sweep has run.
		query += ` AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, fmtTime(p.Now))
	}
	if p.RequestedBy != "" {
		query += ` AND requested_by = ?`
		args = append(args, p.RequestedBy)
	}
	if p.AgentExecuted {
		query += ` AND NOT has_webhook`
	}
	// The updated row as stored: nothing below changes it (the event and
	// the stale ticket are rows of their own).
	query += ` RETURNING ` + actionColumns

	var (
		row      actionRow
		ticket   *queue.Ticket
		a        *queue.Action
		mismatch bool
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		a, ticket, mismatch = nil, nil, false
		err := row.scan(tx.QueryRowContext(ctx, query, args...))
		if errors.Is(err, sql.ErrNoRows) {
			if a, err = getActionWithTicket(ctx, tx, p.ID); err != nil {
				return err
			}
			mismatch = true
			return nil // nothing was written; commit is as good as rollback
		}
		if err != nil {
			return err
		}
		ev := p.Event
		ev.ActionID = p.ID
		if ev.At.IsZero() {
			ev.At = p.Now
		}
		if ev.Kind != "" {
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		if p.ResolveStale != nil {
			if err := resolveStaleTicket(ctx, tx, p.ID, p.ResolveStale); err != nil {
				return err
			}
		}
		ticket, err = actionTicket(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
	}
	if !mismatch {
		// Decoded after the commit, outside the writer. Its new times were
		// checked above; the rest (tool snapshot, warnings, approvals) this
		// store wrote as JSON it encoded, and the update did not touch it.
		if a, err = row.action(); err != nil {
			return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
		}
		a.Ticket = ticket
	}
	if mismatch {
		return a, fmt.Errorf("transition action %s from %v to %s: it is %s: %w", p.ID, p.From, p.To, a.State, queue.ErrStateMismatch)
	}
	s.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
	return a, nil
}

// resolveStaleTicket writes r to the action's open stale ticket, if any,
// and its ticket_resolved event, after the action's row and its outcome
// event: r is the domain's (queue.LateResolution), written as it is, its
// data with the ticket's id added.
func resolveStaleTicket(ctx context.Context, tx querier, actionID string, r *queue.StaleResolution) error {
	var ticketID string
	err := tx.QueryRowContext(ctx, `UPDATE tickets SET state = 'resolved', resolved_at = ?, resolved_by = ?,
		outcome = ?, note = ?
	WHERE action_id = ? AND kind = 'stale' AND state = 'open' RETURNING id`,
		fmtTime(r.At), r.By, string(r.Outcome), r.Note, actionID).Scan(&ticketID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
	VALUES (?, ?, ?, ?, ?, json_set(coalesce(?, '{}'), '$.ticket', ?), 0)`,
		actionID, queue.EventTicketResolved, r.By, r.Channel, fmtTime(r.At), nullJSON(r.Data), ticketID)
	return err
}
