package sqlite

import (
	"context"
	"fmt"

	"github.com/approvals/approvals/queue"
)

// ActionDecide implements queue.Store. The write transaction is immediate:
// it holds SQLite's one write lock from its first statement, which locks
// the action (and everything else) before queue.PlanDecision reads it.
func (s *Store) ActionDecide(ctx context.Context, p queue.ActionDecideParams) (queue.ActionDecideResult, error) {
	var (
		a       *queue.Action
		outcome queue.DecideOutcome
		refusal error
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		outcome, refusal = 0, nil
		var err error
		if a, err = getActionWithTicket(ctx, tx, p.ID); err != nil {
			return err
		}
		plan, err := queue.PlanDecision(a, p)
		if err != nil {
			refusal = err
			return nil
		}
		outcome = plan.Outcome
		if outcome == queue.DecideReplayed {
			return nil
		}
		var note any
		if p.Note != "" {
			note = p.Note
		}
		var n int64
		switch {
		case outcome == queue.DecideCounted:
			n, err = rowsAffected(tx.ExecContext(ctx, `UPDATE actions SET approvals = ? WHERE id = ? AND state = 'pending'`,
				queue.ApprovalsJSON(plan.Approvals), p.ID))
		case p.To == queue.StateApproved:
			approved := p.ApprovedPayload
			if approved == nil {
				approved = a.Payload
			}
			n, err = rowsAffected(tx.ExecContext(ctx, `UPDATE actions SET state = 'approved', decided_by = ?, decided_at = ?,
		decision_note = ?, approved_payload = ?, expires_at = ?, approvals = ?
	WHERE id = ? AND state = 'pending'`,
				p.By, fmtTime(p.Now), note, string(approved), fmtTime(p.ExpiresAt), queue.ApprovalsJSON(plan.Approvals), p.ID))
		default:
			n, err = rowsAffected(tx.ExecContext(ctx, `UPDATE actions SET state = ?, decided_by = ?, decided_at = ?,
		decision_note = ?, finished_at = ?
	WHERE id = ? AND state = 'pending'`, string(p.To), p.By, fmtTime(p.Now), note, fmtTime(p.Now), p.ID))
		}
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("the locked action left pending")
		}
		ev := plan.Event
		ev.ActionID, ev.At = p.ID, p.Now
		if _, err := insertEvent(ctx, tx, ev); err != nil {
			return err
		}
		if p.Grant != nil && outcome == queue.DecideTransitioned && p.To == queue.StateApproved {
			if err := insertGrant(ctx, tx, p.Grant); err != nil {
				return err
			}
			gev := p.GrantEvent
			gev.ActionID, gev.At = p.ID, p.Now
			if _, err := insertEvent(ctx, tx, gev); err != nil {
				return err
			}
		}
		a, err = getActionWithTicket(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return queue.ActionDecideResult{}, fmt.Errorf("decide %s: %w", p.ID, err)
	}
	if refusal != nil {
		return queue.ActionDecideResult{Action: a}, refusal
	}
	if outcome == queue.DecideTransitioned {
		s.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
	}
	return queue.ActionDecideResult{Action: a, Outcome: outcome}, nil
}
