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
func (s *Store) ActionDecide(ctx context.Context, p queue.ActionDecideParams) (*queue.Action, queue.DecideOutcome, error) {
	if !queue.ValidID(p.ID) {
		return nil, 0, queue.ActionNotFound(p.ID)
	}
	var (
		a       *queue.Action
		outcome queue.DecideOutcome
		refusal error
	)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		a, err = scanAction(tx.QueryRow(ctx, selectAction+` WHERE a.id = $1 FOR UPDATE OF a`, p.ID))
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
		if ap := plan.Approval; ap != nil {
			tag, err := tx.Exec(ctx, `INSERT INTO approvals (action_id, by, at, note, channel)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, p.ID, ap.By, ap.At, ap.Note, ap.Channel)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				// The constraint knows better than the column: the user
				// has approved already.
				outcome = queue.DecideReplayed
				return nil
			}
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
		a, err = scanAction(tx.QueryRow(ctx, selectAction+` WHERE a.id = $1`, p.ID))
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("decide %s: %w", p.ID, err)
	}
	if refusal != nil {
		return a, 0, refusal
	}
	return a, outcome, nil
}
