package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// ActionExpireDue expires pending and approved actions whose expires_at has
// passed, in one conditional update.
func (s *Store) ActionExpireDue(ctx context.Context, p queue.DueParams) ([]*queue.Action, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("expire due actions: %w", queue.ErrNoEvent)
	}
	now, limit := p.Now, p.Limit
	if limit <= 0 {
		limit = 100
	}
	ts := fmtTime(now)
	var list []*queue.Action
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		list = nil
		// An expired pending action was decided by the event's actor (the
		// system); an approved one keeps the decision of the human who
		// approved it.
		rows, err := tx.QueryContext(ctx, `UPDATE actions SET state = 'expired',
			decided_by = CASE WHEN state = 'pending' THEN ?3 ELSE decided_by END,
			decided_at = CASE WHEN state = 'pending' THEN ?1 ELSE decided_at END,
			finished_at = ?1
		WHERE id IN (SELECT id FROM actions WHERE state IN ('pending', 'approved') AND expires_at <= ?1
		             ORDER BY expires_at, id LIMIT ?2)
		  AND state IN ('pending', 'approved') AND expires_at <= ?1
		RETURNING id`, ts, limit, p.Event.Actor)
		if err != nil {
			return err
		}
		ids, err := scanIDs(rows)
		if err != nil {
			return err
		}
		for _, id := range ids {
			ev := p.Event
			ev.ActionID = id
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
			a, err := getActionWithTicket(ctx, tx, id)
			if err != nil {
				return err
			}
			list = append(list, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire due actions: %w", err)
	}
	for _, a := range list {
		s.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
	}
	return list, nil
}

// TicketOpenStale opens one stale ticket for every action in_progress past
// its claim deadline that has none open.
func (s *Store) TicketOpenStale(ctx context.Context, p queue.DueParams) ([]*queue.Ticket, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("open stale tickets: %w", queue.ErrNoEvent)
	}
	now, limit := p.Now, p.Limit
	if limit <= 0 {
		limit = 100
	}
	var opened []*queue.Ticket
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		opened = nil
		rows, err := tx.QueryContext(ctx, `SELECT id FROM actions a
		WHERE state = 'in_progress' AND claim_deadline <= ?
		  AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.action_id = a.id AND t.kind = 'stale' AND t.state = 'open')
		ORDER BY claim_deadline, id LIMIT ?`, fmtTime(now), limit)
		if err != nil {
			return err
		}
		ids, err := scanIDs(rows)
		if err != nil {
			return err
		}
		for _, id := range ids {
			t, err := openTicket(ctx, tx, id, queue.TicketStale, now, p.Event)
			if err != nil {
				return err
			}
			if t != nil {
				opened = append(opened, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open stale tickets: %w", err)
	}
	return opened, nil
}

// ActionRemindDue implements queue.Store. The immediate transaction holds
// the one write lock, so a concurrent sweep sees this one's reminded_at.
func (s *Store) ActionRemindDue(ctx context.Context, p queue.DueParams) (int, error) {
	return s.routeDue(ctx, p, "remind_after", "reminded_at")
}

// ActionEscalateDue implements queue.Store.
func (s *Store) ActionEscalateDue(ctx context.Context, p queue.DueParams) (int, error) {
	return s.routeDue(ctx, p, "escalate_after", "escalated_at")
}

// routeDue finds the pending actions whose rule's key (remind_after or
// escalate_after, nanoseconds) has passed since column (or submission) and
// sets column with p.Event each. An escalation happens once: its clock
// starts at submission and its column, once set, stops it.
func (s *Store) routeDue(ctx context.Context, p queue.DueParams, key, column string) (int, error) {
	now, limit := p.Now, p.Limit
	if p.Event.Kind == "" {
		return 0, fmt.Errorf("%s: %w", column, queue.ErrNoEvent)
	}
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
				ev := p.Event
				ev.ActionID = id
				if _, err := insertEvent(ctx, tx, ev); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Event.Kind, err)
	}
	return n, nil
}
