package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// NotificationFanOut implements queue.Store.
func (s *Store) NotificationFanOut(ctx context.Context, p queue.NotificationFanOutParams) (int, error) {
	limit, route := p.Limit, p.Route
	var n int
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, fanOutSQL, limit)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.Event, error) {
			var ev queue.Event
			var data []byte
			err := row.Scan(&ev.ID, &ev.ActionID, &ev.Subject, &ev.Kind, &ev.Actor, &ev.Channel, &ev.At, &data)
			ev.Data = nullableJSON(data)
			ev.At = ev.At.UTC()
			return ev, err
		})
		if err != nil {
			return err
		}
		n = len(evs)
		ids := make([]int64, len(evs))
		var actionIDs []string
		for i, ev := range evs {
			ids[i] = ev.ID
			if ev.ActionID != "" {
				actionIDs = append(actionIDs, ev.ActionID)
			}
		}
		// The events' actions in one query, not one round trip each.
		actionUUIDs := uuidArray(actionIDs)
		rows, err = tx.Query(ctx, actionsByIDSQL, actionUUIDs)
		if err != nil {
			return err
		}
		list, err := collectActions(rows)
		if err != nil {
			return err
		}
		actions := make(map[string]*queue.Action, len(list))
		for _, a := range list {
			actions[a.ID] = a
		}
		rows, err = tx.Query(ctx, channelMessagesOfSQL, actionUUIDs)
		if err != nil {
			return err
		}
		msgs, err := pgx.CollectRows(rows, scanChannelMessage)
		if err != nil {
			return err
		}
		sent := map[string][]queue.ChannelMessage{}
		for _, m := range msgs {
			sent[m.ActionID] = append(sent[m.ActionID], m)
		}
		for _, ev := range evs {
			if planID := queue.PlanOfEvent(ev); planID != "" {
				if err := s.fanOutPlan(ctx, tx, ev, planID, p.RoutePlan); err != nil {
					return err
				}
				continue
			}
			if ev.ActionID == "" {
				continue // an event of no action nor plan tells nobody
			}
			a, ok := actions[ev.ActionID]
			if !ok {
				return fmt.Errorf("read action %s of event %d: %w", ev.ActionID, ev.ID, pgx.ErrNoRows)
			}
			for _, r := range route(ev, a, sent[ev.ActionID]) {
				if _, err := tx.Exec(ctx, notificationInsertSQL, r.ID, ev.ID, ev.ActionID, r.Type, r.Channel, r.Kind, r.CreatedAt, r.DueAt); err != nil {
					return err
				}
			}
		}
		if len(ids) > 0 {
			_, err = tx.Exec(ctx, fannedOutSQL, ids)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", err)
	}
	return n, nil
}

// fanOutPlan inserts the notifications of a plan's event, inside the
// fan-out's transaction.
func (s *Store) fanOutPlan(ctx context.Context, tx pgx.Tx, ev queue.Event, planID string,
	route func(queue.Event, *queue.Plan, []queue.ChannelMessage) []queue.NotificationRecord) error {
	if route == nil || !queue.ValidID(planID) {
		return nil
	}
	pl, err := s.PlanGetByID(ctx, planID)
	if err != nil {
		return fmt.Errorf("read plan %s of event %d: %w", planID, ev.ID, err)
	}
	sent, err := s.PlanMessageList(ctx, planID)
	if err != nil {
		return err
	}
	for _, r := range route(ev, pl, sent) {
		if _, err := tx.Exec(ctx, planNotificationInsertSQL, r.ID, ev.ID, planID, r.Type, r.Channel, r.Kind, r.CreatedAt, r.DueAt); err != nil {
			return err
		}
	}
	return nil
}

func scanNotification(row pgx.CollectableRow) (queue.NotificationRecord, error) {
	var r queue.NotificationRecord
	var state string
	var data []byte
	err := row.Scan(&r.ID, &r.EventID, &r.ActionID, &r.PlanID, &r.Type, &r.Channel, &r.Kind, &state, &r.Attempts,
		&r.CreatedAt, &r.DueAt, &r.DeliveredAt, &r.LastError, &r.EventAt, &data)
	r.State = queue.NotificationState(state)
	r.EventData = json.RawMessage(nullableJSON(data))
	utc(&r.CreatedAt)
	utc(&r.DueAt)
	utc(&r.EventAt)
	utcp(r.DeliveredAt)
	return r, err
}

// NotificationClaim implements queue.Store: one statement takes the due
// rows (SKIP LOCKED) and moves them a lease ahead, so once it commits no
// other sender finds them due.
func (s *Store) NotificationClaim(ctx context.Context, p queue.NotificationClaimParams) ([]queue.NotificationRecord, error) {
	rows, err := s.pool.Query(ctx, notificationClaimSQL, p.Now, p.Now.Add(p.Lease), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNotification)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

// NotificationSettle implements queue.Store.
func (s *Store) NotificationSettle(ctx context.Context, p queue.NotificationSettleParams) (bool, error) {
	var delivered *time.Time
	due := p.DueAt
	if p.State == queue.NotificationDelivered {
		delivered = &p.Now
	}
	if p.State != queue.NotificationPending {
		due = p.Now
	}
	var lastErr *string
	if p.LastError != "" {
		lastErr = &p.LastError
	}
	tag, err := s.pool.Exec(ctx, notificationSettleSQL, p.ID, p.Attempts, string(p.State), due, delivered, lastErr)
	if err != nil {
		return false, fmt.Errorf("settle notification %s: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// NotificationList implements queue.Store.
func (s *Store) NotificationList(ctx context.Context, actionID string) ([]queue.NotificationRecord, error) {
	if !queue.ValidID(actionID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, notificationListSQL, actionID)
	if err != nil {
		return nil, fmt.Errorf("list notifications of %s: %w", actionID, err)
	}
	return pgx.CollectRows(rows, scanNotification)
}

// NotificationCountPending implements queue.Store.
func (s *Store) NotificationCountPending(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, notificationCountPendingSQL).Scan(&n)
	return n, err
}

// ChannelMessageAdd implements queue.ChannelMessages; adding the same
// message twice (a repeated notification) keeps one.
func (s *Store) ChannelMessageAdd(ctx context.Context, m queue.ChannelMessage) error {
	if m.PlanID != "" {
		if !queue.ValidID(m.PlanID) {
			return queue.PlanNotFound(m.PlanID)
		}
		_, err := s.pool.Exec(ctx, planMessageAddSQL, m.PlanID, m.Kind, m.Address, m.Ref, m.SentAt)
		if isForeignKeyViolation(err) {
			return queue.PlanNotFound(m.PlanID)
		}
		return err
	}
	if !queue.ValidID(m.ActionID) {
		return queue.ActionNotFound(m.ActionID)
	}
	_, err := s.pool.Exec(ctx, channelMessageAddSQL, m.ActionID, m.Kind, m.Address, m.Ref, m.SentAt)
	if isForeignKeyViolation(err) {
		return queue.ActionNotFound(m.ActionID)
	}
	return err
}

// ChannelMessageList implements queue.ChannelMessages.
func (s *Store) ChannelMessageList(ctx context.Context, actionID string) ([]queue.ChannelMessage, error) {
	if !queue.ValidID(actionID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, channelMessageListSQL, actionID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanChannelMessage)
}

func scanChannelMessage(row pgx.CollectableRow) (queue.ChannelMessage, error) {
	var m queue.ChannelMessage
	err := row.Scan(&m.ActionID, &m.Kind, &m.Address, &m.Ref, &m.SentAt)
	m.SentAt = m.SentAt.UTC()
	return m, err
}

// PlanMessageList implements queue.ChannelMessages.
func (s *Store) PlanMessageList(ctx context.Context, planID string) ([]queue.ChannelMessage, error) {
	if !queue.ValidID(planID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, planMessageListSQL, planID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.ChannelMessage, error) {
		var m queue.ChannelMessage
		err := row.Scan(&m.PlanID, &m.Kind, &m.Address, &m.Ref, &m.SentAt)
		m.SentAt = m.SentAt.UTC()
		return m, err
	})
}
