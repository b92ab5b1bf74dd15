package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/approvals/approvals/queue"
)

// insertEvent appends ev and returns its id. An unknown action is
// ErrNotFound (the foreign key refuses it).
func insertEvent(ctx context.Context, q querier, ev queue.Event) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
	VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		ev.ActionID, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), boolInt(ev.Unrouted)).Scan(&id)
	if isForeignKeyViolation(err) {
		return 0, queue.ActionNotFound(ev.ActionID)
	}
	return id, err
}

// EventInsert appends an event that changes no state.
func (s *Store) EventInsert(ctx context.Context, ev queue.Event) error {
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		_, err := insertEvent(ctx, tx, ev)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert %s event for action %s: %w", ev.Kind, ev.ActionID, err)
	}
	return nil
}

// StaffEventInsert implements queue.Store: an event of no action about a
// subject, which notifies nobody.
func (s *Store) StaffEventInsert(ctx context.Context, ev queue.Event) error {
	_, err := s.exec(ctx, `INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
	VALUES (NULL, nullif(?, ''), ?, ?, ?, ?, ?, 1)`,
		ev.Subject, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data))
	if err != nil {
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	return nil
}

// EventList returns events matching p, newest first.
func (s *Store) EventList(ctx context.Context, p queue.EventListParams) ([]queue.Event, error) {
	var (
		where []string
		args  []any
	)
	if p.ActionID != "" {
		where = append(where, `action_id = ?`)
		args = append(args, p.ActionID)
	}
	if p.Kind != "" {
		where = append(where, `kind = ?`)
		args = append(args, p.Kind)
	}
	if p.Actor != "" {
		where = append(where, `actor = ?`)
		args = append(args, p.Actor)
	}
	if p.BeforeID > 0 {
		where = append(where, `id < ?`)
		args = append(args, p.BeforeID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT id, coalesce(action_id, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)

	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var list []queue.Event
	for rows.Next() {
		var (
			ev   queue.Event
			at   string
			data sql.NullString
		)
		if err := rows.Scan(&ev.ID, &ev.ActionID, &ev.Subject, &ev.Kind, &ev.Actor, &ev.Channel, &at, &data); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		if ev.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		ev.Data = rawJSON(data)
		list = append(list, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return list, nil
}
