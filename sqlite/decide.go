package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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

// ActionRemindDue implements queue.Store. The immediate transaction holds
// the one write lock, so a concurrent sweep sees this one's reminded_at.
func (s *Store) ActionRemindDue(ctx context.Context, p queue.DueParams) (int, error) {
	return s.routeDue(ctx, p.Now, p.Limit, "remind_after", "reminded_at", queue.EventReminder)
}

// ActionEscalateDue implements queue.Store.
func (s *Store) ActionEscalateDue(ctx context.Context, p queue.DueParams) (int, error) {
	return s.routeDue(ctx, p.Now, p.Limit, "escalate_after", "escalated_at", queue.EventEscalated)
}

// routeDue finds the pending actions whose rule's key (remind_after or
// escalate_after, nanoseconds) has passed since column (or submission) and
// sets column with an event each. An escalation happens once: its clock
// starts at submission and its column, once set, stops it.
func (s *Store) routeDue(ctx context.Context, now time.Time, limit int, key, column, kind string) (int, error) {
	n := 0
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		n = 0
		once := ""
		if column == "escalated_at" {
			once = " AND escalated_at IS NULL" // escalated once, then never again
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, created_at, `+column+`, json_extract(spec, '$.approval.`+key+`')
	FROM actions WHERE state = 'pending' AND json_extract(spec, '$.approval.`+key+`') > 0`+once+` ORDER BY created_at`)
		if err != nil {
			return err
		}
		var due []string
		for rows.Next() && len(due) < limit {
			var id, created string
			var last sql.NullString
			var after int64
			if err := rows.Scan(&id, &created, &last, &after); err != nil {
				rows.Close()
				return err
			}
			from := created
			if last.Valid {
				from = last.String
			}
			t, err := parseTime(from)
			if err != nil {
				rows.Close()
				return err
			}
			if !t.Add(time.Duration(after)).After(now) {
				due = append(due, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range due {
			k, err := rowsAffected(tx.ExecContext(ctx, `UPDATE actions SET `+column+` = ? WHERE id = ? AND state = 'pending'`, fmtTime(now), id))
			if err != nil {
				return err
			}
			if k == 1 {
				if _, err := insertEvent(ctx, tx, queue.Event{ActionID: id, Kind: kind, Actor: "system", At: now}); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", kind, err)
	}
	return n, nil
}
