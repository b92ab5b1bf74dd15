package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// EventInsert implements queue.Store.
func (s *Store) EventInsert(ctx context.Context, ev queue.Event) error {
	if !queue.ValidID(ev.ActionID) {
		return queue.ActionNotFound(ev.ActionID)
	}
	// Replays record one each, so it goes through the batcher; it takes no
	// lock (eventInsertSQL reads the action without one). A replay's
	// record commits lazily (queue.IsReplayRecord).
	_, err := s.batch.call(ctx, &batchCall{kind: eventInserts{}, arg: ev, order: "event:" + strings.ToLower(ev.ActionID),
		lazy: queue.IsReplayRecord(ev.Kind),
		sql:  eventInsertSQL,
		args: []any{ev.ActionID, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)},
		scan: scanAppended})
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.ActionNotFound(ev.ActionID)
	}
	if err != nil {
		return fmt.Errorf("record %s event for %s: %w", ev.Kind, ev.ActionID, err)
	}
	return nil
}

// StaffEventInsert implements queue.Store.
func (s *Store) StaffEventInsert(ctx context.Context, ev queue.Event) error {
	if _, err := s.pool.Exec(ctx, staffEventInsertSQL, ev.Subject, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data)); err != nil {
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	return nil
}

// scanAppended reads the row of an appended event: none, no action.
func scanAppended(row pgx.Row) (any, error) {
	var zero int
	return nil, row.Scan(&zero)
}

// eventInserts merges the event inserts of a batch into one.
type eventInserts struct{}

func (eventInserts) merge(calls []*batchCall) (string, []any) {
	n := len(calls)
	ids, kinds, actors, channels := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at, data := make([]time.Time, n), make([]*string, n)
	for i, c := range calls {
		ev := c.arg.(queue.Event)
		ids[i], kinds[i], actors[i], channels[i], at[i] = ev.ActionID, ev.Kind, ev.Actor, ev.Channel, ev.At
		if ev.Data != nil {
			d := string(ev.Data)
			data[i] = &d
		}
	}
	return eventInsertManySQL, []any{uuidArray(ids), kinds, actors, channels, at, data}
}

// EventList implements queue.Store.
func (s *Store) EventList(ctx context.Context, p queue.EventListParams) ([]queue.Event, error) {
	if p.ActionID != "" && !queue.ValidID(p.ActionID) {
		return nil, nil
	}
	q, args := eventListSQL(p)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []queue.Event
	for rows.Next() {
		var ev queue.Event
		var data []byte
		if err := rows.Scan(&ev.ID, &ev.ActionID, &ev.Subject, &ev.Kind, &ev.Actor, &ev.Channel, &ev.At, &data); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		ev.At = ev.At.UTC()
		ev.Data = nullableJSON(data)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// kindLiteral says whether kind may be written into a statement as it is:
// 1 to 64 lowercase letters and underscores, as every event kind is.
func kindLiteral(kind string) bool {
	if len(kind) == 0 || len(kind) > 64 {
		return false
	}
	for _, r := range kind {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return true
}

// eventListSQL builds EventList's statement from the filters p sets
// (testdata/event_list.golden).
func eventListSQL(p queue.EventListParams) (string, []any) {
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if p.ActionID != "" {
		where = append(where, "action_id = "+arg(p.ActionID))
	}
	if p.Kind != "" {
		// A kind is written as a literal, so the plan of each kind is its
		// own and the planner can prove the predicate of events_kind_listed,
		// which holds only the kinds that are few (migration 00029); a
		// parameter's generic plan could not use it. A kind is lowercase
		// letters and underscores; anything else is no kind and stays a
		// parameter.
		if kindLiteral(p.Kind) {
			where = append(where, "kind = '"+p.Kind+"'")
		} else {
			where = append(where, "kind = "+arg(p.Kind))
		}
	}
	if p.Actor != "" {
		where = append(where, "actor = "+arg(p.Actor))
	}
	if p.BeforeID > 0 {
		where = append(where, "id < "+arg(p.BeforeID))
	}
	q := eventListSelect
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += "\nORDER BY id DESC LIMIT " + arg(limit)
	return q, args
}
