package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/approvals/approvals/queue"
)

// fanOutSQL repeats the partial index events_fan_out's predicate, so the
// scan reads only that index.
var fanOutSQL = `SELECT id, coalesce(action_id, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events
WHERE fanned_out = 0 AND kind IN (` + queue.NotifyingKindsSQL() + `)
ORDER BY id LIMIT ?`

// NotificationFanOut implements queue.Store. The immediate transaction
// holds the one write lock, so no other fan-out takes the same events.
func (s *Store) NotificationFanOut(ctx context.Context, p queue.NotificationFanOutParams) (int, error) {
	limit, route := p.Limit, p.Route
	var n int
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		n = 0
		rows, err := tx.QueryContext(ctx, fanOutSQL, limit)
		if err != nil {
			return err
		}
		var evs []queue.Event
		for rows.Next() {
			var ev queue.Event
			var at string
			var data sql.NullString
			if err := rows.Scan(&ev.ID, &ev.ActionID, &ev.Subject, &ev.Kind, &ev.Actor, &ev.Channel, &at, &data); err != nil {
				rows.Close()
				return err
			}
			if ev.At, err = parseTime(at); err != nil {
				rows.Close()
				return err
			}
			ev.Data = rawJSON(data)
			evs = append(evs, ev)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		n = len(evs)
		for _, ev := range evs {
			if planID := queue.PlanOfEvent(ev); planID != "" {
				if err := s.fanOutPlan(ctx, tx, ev, planID, p.RoutePlan); err != nil {
					return err
				}
				continue
			}
			a, err := getActionWithTicket(ctx, tx, ev.ActionID)
			if err != nil {
				return fmt.Errorf("read action %s of event %d: %w", ev.ActionID, ev.ID, err)
			}
			sent, err := channelMessages(ctx, tx, ev.ActionID)
			if err != nil {
				return err
			}
			for _, r := range route(ev, a, sent) {
				if _, err := tx.ExecContext(ctx, `INSERT INTO notifications (id, event_id, action_id, type, channel, kind, state, created_at, due_at)
	VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (event_id, channel) DO NOTHING`,
					r.ID, ev.ID, ev.ActionID, r.Type, r.Channel, r.Kind, fmtTime(r.CreatedAt), fmtTime(r.DueAt)); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE events SET fanned_out = 1 WHERE id = ?`, ev.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", err)
	}
	return n, nil
}

// fanOutPlan inserts the notifications of a plan's event and marks it
// fanned out, inside the fan-out's transaction.
func (s *Store) fanOutPlan(ctx context.Context, tx querier, ev queue.Event, planID string,
	route func(queue.Event, *queue.Plan, []queue.ChannelMessage) []queue.NotificationRecord) error {
	if route != nil {
		plans, err := s.readPlans(ctx, `SELECT `+planColumns+` FROM plans WHERE id = ?`, planID)
		if err != nil {
			return fmt.Errorf("read plan %s of event %d: %w", planID, ev.ID, err)
		}
		if len(plans) == 0 {
			return fmt.Errorf("read plan %s of event %d: %w", planID, ev.ID, queue.ErrNotFound)
		}
		sent, err := planMessages(ctx, tx, planID)
		if err != nil {
			return err
		}
		for _, r := range route(ev, plans[0], sent) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO notifications (id, event_id, plan_id, type, channel, kind, state, created_at, due_at)
	VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (event_id, channel) DO NOTHING`,
				r.ID, ev.ID, planID, r.Type, r.Channel, r.Kind, fmtTime(r.CreatedAt), fmtTime(r.DueAt)); err != nil {
				return err
			}
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE events SET fanned_out = 1 WHERE id = ?`, ev.ID)
	return err
}

const notificationColumns = `n.id, n.event_id, coalesce(n.action_id, ''), coalesce(n.plan_id, ''), n.type, n.channel, n.kind, n.state, n.attempts,
	n.created_at, n.due_at, n.delivered_at, coalesce(n.last_error, ''), e.at, e.data`

func scanNotifications(rows *sql.Rows, err error) ([]queue.NotificationRecord, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queue.NotificationRecord
	for rows.Next() {
		var (
			r                       queue.NotificationRecord
			state, created, due, at string
			delivered, data         sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.EventID, &r.ActionID, &r.PlanID, &r.Type, &r.Channel, &r.Kind, &state, &r.Attempts,
			&created, &due, &delivered, &r.LastError, &at, &data); err != nil {
			return nil, err
		}
		r.State = queue.NotificationState(state)
		r.EventData = json.RawMessage(rawJSON(data))
		var err error
		if r.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		if r.DueAt, err = parseTime(due); err != nil {
			return nil, err
		}
		if r.EventAt, err = parseTime(at); err != nil {
			return nil, err
		}
		if r.DeliveredAt, err = parseNullTime(delivered); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// NotificationClaim implements queue.Store.
func (s *Store) NotificationClaim(ctx context.Context, p queue.NotificationClaimParams) ([]queue.NotificationRecord, error) {
	now, lease, limit := p.Now, p.Lease, p.Limit
	var out []queue.NotificationRecord
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		out = nil
		var ids []string
		rows, err := tx.QueryContext(ctx, `UPDATE notifications SET due_at = ?, attempts = attempts + 1
	WHERE id IN (SELECT id FROM notifications WHERE state = 'pending' AND due_at <= ? ORDER BY due_at LIMIT ?)
	RETURNING id`, fmtTime(now.Add(lease)), fmtTime(now), limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		out, err = scanNotifications(tx.QueryContext(ctx, `SELECT `+notificationColumns+`
	FROM notifications n JOIN events e ON e.id = n.event_id
	WHERE n.id IN (`+placeholders(len(ids))+`) ORDER BY n.created_at`, args...))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

// NotificationSettle implements queue.Store.
func (s *Store) NotificationSettle(ctx context.Context, p queue.NotificationSettleParams) (bool, error) {
	var delivered any
	due := p.DueAt
	if p.State == queue.NotificationDelivered {
		delivered = fmtTime(p.Now)
	}
	if p.State != queue.NotificationPending {
		due = p.Now
	}
	var lastErr any
	if p.LastError != "" {
		lastErr = p.LastError
	}
	n, err := s.exec(ctx, `UPDATE notifications SET state = ?, due_at = ?, delivered_at = ?,
		last_error = coalesce(?, last_error)
	WHERE id = ? AND state = 'pending' AND attempts = ?`, string(p.State), fmtTime(due), delivered, lastErr, p.ID, p.Attempts)
	if err != nil {
		return false, fmt.Errorf("settle notification %s: %w", p.ID, err)
	}
	return n == 1, nil
}

// NotificationList implements queue.Store.
func (s *Store) NotificationList(ctx context.Context, actionID string) ([]queue.NotificationRecord, error) {
	out, err := scanNotifications(s.read.QueryContext(ctx, `SELECT `+notificationColumns+`
	FROM notifications n JOIN events e ON e.id = n.event_id
	WHERE n.action_id = ? ORDER BY n.event_id, n.channel`, actionID))
	if err != nil {
		return nil, fmt.Errorf("list notifications of %s: %w", actionID, err)
	}
	return out, nil
}

// NotificationCountPending implements queue.Store.
func (s *Store) NotificationCountPending(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE state = 'pending'`).Scan(&n)
	return n, err
}

// ChannelMessageAdd implements queue.ChannelMessages.
func (s *Store) ChannelMessageAdd(ctx context.Context, m queue.ChannelMessage) error {
	if m.PlanID != "" {
		_, err := s.exec(ctx, `INSERT INTO plan_messages (plan_id, kind, address, ref, sent_at) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`, m.PlanID, m.Kind, m.Address, m.Ref, fmtTime(m.SentAt))
		if isForeignKeyViolation(err) {
			return queue.PlanNotFound(m.PlanID)
		}
		return err
	}
	_, err := s.exec(ctx, `INSERT INTO channel_messages (action_id, kind, address, ref, sent_at) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`, m.ActionID, m.Kind, m.Address, m.Ref, fmtTime(m.SentAt))
	if isForeignKeyViolation(err) {
		return queue.ActionNotFound(m.ActionID)
	}
	return err
}

// ChannelMessageList implements queue.ChannelMessages.
func (s *Store) ChannelMessageList(ctx context.Context, actionID string) ([]queue.ChannelMessage, error) {
	return channelMessages(ctx, s.read, actionID)
}

// channelMessagesSQL reads an action's messages, oldest first.
const channelMessagesSQL = `SELECT action_id, kind, address, ref, sent_at FROM channel_messages
	WHERE action_id = ? ORDER BY sent_at, kind, address, ref`

func channelMessages(ctx context.Context, q querier, actionID string) ([]queue.ChannelMessage, error) {
	rows, err := q.QueryContext(ctx, channelMessagesSQL, actionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queue.ChannelMessage
	for rows.Next() {
		var m queue.ChannelMessage
		var at string
		if err := rows.Scan(&m.ActionID, &m.Kind, &m.Address, &m.Ref, &at); err != nil {
			return nil, err
		}
		if m.SentAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// PlanMessageList implements queue.ChannelMessages.
func (s *Store) PlanMessageList(ctx context.Context, planID string) ([]queue.ChannelMessage, error) {
	return planMessages(ctx, s.read, planID)
}

func planMessages(ctx context.Context, q querier, planID string) ([]queue.ChannelMessage, error) {
	rows, err := q.QueryContext(ctx, `SELECT plan_id, kind, address, ref, sent_at FROM plan_messages
	WHERE plan_id = ? ORDER BY sent_at, kind, address, ref`, planID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queue.ChannelMessage
	for rows.Next() {
		var m queue.ChannelMessage
		var at string
		if err := rows.Scan(&m.PlanID, &m.Kind, &m.Address, &m.Ref, &at); err != nil {
			return nil, err
		}
		if m.SentAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
