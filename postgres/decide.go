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
		a, err = scanAction(tx.QueryRow(ctx, decideLockSQL, p.ID))
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
			tag, err = tx.Exec(ctx, decideCountSQL, p.ID, queue.ApprovalsJSON(plan.Approvals))
		case p.To == queue.StateApproved:
			approved := p.ApprovedPayload
			if approved == nil {
				approved = a.Payload
			}
			tag, err = tx.Exec(ctx, decideApproveSQL,
				p.ID, p.By, p.Now, note, string(approved), p.ExpiresAt, queue.ApprovalsJSON(plan.Approvals))
		default:
			tag, err = tx.Exec(ctx, decideFinalSQL, p.ID, string(p.To), p.By, p.Now, note)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("the locked action left pending")
		}
		ev := plan.Event
		if _, err := tx.Exec(ctx, decideEventSQL, p.ID, ev.Kind, ev.Actor, ev.Channel, p.Now, jsonArg(ev.Data)); err != nil {
			return err
		}
		if p.Grant != nil && outcome == queue.DecideTransitioned && p.To == queue.StateApproved {
			if err := insertGrant(ctx, tx, p.Grant, p.GrantEvent); err != nil {
				return err
			}
		}
		a, err = scanAction(tx.QueryRow(ctx, actionGetByIDSQL, p.ID))
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
