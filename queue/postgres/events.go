package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/approvals/approvals/queue"
)

// EventInsert implements queue.Store.
func (s *Store) EventInsert(ctx context.Context, ev queue.Event) error {
	if !queue.ValidID(ev.ActionID) {
		return queue.ErrNotFound
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, $2, $3, $4, $5, $6)`,
		ev.ActionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data))
	if isForeignKeyViolation(err) {
		return queue.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record %s event for %s: %w", ev.Kind, ev.ActionID, err)
	}
	return nil
}

// EventList implements queue.Store.
func (s *Store) EventList(ctx context.Context, p queue.EventListParams) ([]queue.Event, error) {
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if p.ActionID != "" {
		if !queue.ValidID(p.ActionID) {
			return nil, nil
		}
		where = append(where, "action_id = "+arg(p.ActionID))
	}
	if p.Kind != "" {
		where = append(where, "kind = "+arg(p.Kind))
	}
	if p.Actor != "" {
		where = append(where, "actor = "+arg(p.Actor))
	}
	if p.BeforeID > 0 {
		where = append(where, "id < "+arg(p.BeforeID))
	}
	q := `SELECT id, action_id::text, kind, actor, channel, at, data FROM events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT " + arg(limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []queue.Event
	for rows.Next() {
		var ev queue.Event
		var data []byte
		if err := rows.Scan(&ev.ID, &ev.ActionID, &ev.Kind, &ev.Actor, &ev.Channel, &ev.At, &data); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		ev.At = ev.At.UTC()
		ev.Data = nullableJSON(data)
		out = append(out, ev)
	}
	return out, rows.Err()
}
