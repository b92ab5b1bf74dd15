package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// ActionDecide implements queue.Store. The action row is locked first
// (FOR UPDATE), so the eligibility, the expiry and the count of approvals
// that queue.PlanDecision reads cannot change before the plan is written:
// twenty concurrent approvals of one action queue on the lock and each
// sees the ones before it.
func (s *Store) ActionDecide(ctx context.Context, p queue.ActionDecideParams) (queue.ActionDecideResult, error) {
	if !queue.ValidID(p.ID) {
		return queue.ActionDecideResult{}, queue.ActionNotFound(p.ID)
	}
	var (
		a       *queue.Action
		outcome queue.DecideOutcome
		refusal error
	)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		a, err = scanAction(tx.QueryRow(ctx, actionListSelect+` WHERE a.id = $1 FOR UPDATE OF a`, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return queue.ActionNotFound(p.ID)
		}
		if err != nil {
			return err
		}
		plan, err := queue.PlanDecision(a, p)
		if err != nil {
			refusal = err
			return nil // nothing was written; commit is as good as rollback
		}
		outcome = plan.Outcome
		if outcome == queue.DecideReplayed {
			return nil
		}
		var note *string
		if p.Note != "" {
			note = &p.Note
		}
		var tag interface{ RowsAffected() int64 }
		switch {
		case outcome == queue.DecideCounted:
			tag, err = tx.Exec(ctx, `UPDATE actions SET approvals = $2 WHERE id = $1 AND state = 'pending'`,
				p.ID, queue.ApprovalsJSON(plan.Approvals))
		case p.To == queue.StateApproved:
			approved := p.ApprovedPayload
			if approved == nil {
				approved = a.Payload
			}
			tag, err = tx.Exec(ctx, `UPDATE actions SET state = 'approved', decided_by = $2, decided_at = $3,
    decision_note = $4, approved_payload = $5, expires_at = $6, approvals = $7
WHERE id = $1 AND state = 'pending'`,
				p.ID, p.By, p.Now, note, string(approved), p.ExpiresAt, queue.ApprovalsJSON(plan.Approvals))
		default:
			tag, err = tx.Exec(ctx, `UPDATE actions SET state = $2, decided_by = $3, decided_at = $4,
    decision_note = $5, finished_at = $4
WHERE id = $1 AND state = 'pending'`, p.ID, string(p.To), p.By, p.Now, note)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("the locked action left pending")
		}
		ev := plan.Event
		if _, err := tx.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data)
VALUES ($1, $2, $3, $4, $5, $6::json)`, p.ID, ev.Kind, ev.Actor, ev.Channel, p.Now, jsonArg(ev.Data)); err != nil {
			return err
		}
		a, err = scanAction(tx.QueryRow(ctx, actionListSelect+` WHERE a.id = $1`, p.ID))
		return err
	})
	if err != nil {
		return queue.ActionDecideResult{}, fmt.Errorf("decide %s: %w", p.ID, err)
	}
	if refusal != nil {
		return queue.ActionDecideResult{Action: a}, refusal
	}
	return queue.ActionDecideResult{Action: a, Outcome: outcome}, nil
}

// approvalAfter is a duration of the action's approval rule (nanoseconds
// in the tool snapshot) as an interval.
func approvalAfter(key string) string {
	return `((a.spec->'approval'->>'` + key + `')::bigint / 1000) * interval '1 microsecond'`
}

// remindDueSQL reminds every pending action whose remind_after has passed
// since its last reminder (or its submission). FOR UPDATE re-checks the
// condition on the row a concurrent sweep just updated, and SKIP LOCKED
// passes over the rows it holds, so each interval sends one reminder.
var remindDueSQL = `WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'pending' AND a.spec->'approval'->>'remind_after' IS NOT NULL
      AND coalesce(a.reminded_at, a.created_at) + ` + approvalAfter("remind_after") + ` <= $1
    ORDER BY a.created_at LIMIT $2 FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET reminded_at = $1 FROM due WHERE a.id = due.id AND a.state = 'pending' RETURNING a.id
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at) SELECT id, 'reminder', 'system', '', $1 FROM upd
)
SELECT count(*) FROM upd`

// escalateDueSQL escalates, once, every pending action whose
// escalate_after has passed since its submission.
var escalateDueSQL = `WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'pending' AND a.escalated_at IS NULL AND a.spec->'approval'->>'escalate_after' IS NOT NULL
      AND a.created_at + ` + approvalAfter("escalate_after") + ` <= $1
    ORDER BY a.created_at LIMIT $2 FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET escalated_at = $1 FROM due WHERE a.id = due.id AND a.state = 'pending' AND a.escalated_at IS NULL
    RETURNING a.id
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at) SELECT id, 'escalated', 'system', '', $1 FROM upd
)
SELECT count(*) FROM upd`

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
