package queue

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"time"
)

// ListRequest filters a listing.
type ListRequest struct {
	IntentKey       string
	IntentKeyPrefix string
	State           State
	Tool            string
	Oldest          bool
	Limit           int
	Cursor          string // from a previous NextCursor
	// WaitingFor (user:EMAIL) keeps only the pending actions that person
	// may decide and has not approved yet: the queue's "waiting for me".
	// Roles are the caller's to check first.
	WaitingFor string
}

// List returns a page of actions and the cursor of the next page ("" at
// the end).
func (s *Service) List(ctx context.Context, r ListRequest) ([]*Action, string, error) {
	if r.WaitingFor != "" {
		return s.listWaitingFor(ctx, r)
	}
	p := ActionListParams{IntentKey: r.IntentKey, IntentKeyPrefix: r.IntentKeyPrefix, State: r.State,
		Tool: r.Tool, Oldest: r.Oldest, Limit: r.Limit + 1}
	if r.Cursor != "" {
		c, err := DecodeCursor(r.Cursor)
		if err != nil {
			return nil, "", err
		}
		p.After = &c
	}
	list, err := s.store.ActionList(ctx, p)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(list) > r.Limit {
		list = list[:r.Limit]
		last := list[len(list)-1]
		next = EncodeCursor(Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return list, next, nil
}

// listWaitingFor pages through the pending actions and keeps those
// waiting for r.WaitingFor. Who may decide is in each action's tool
// snapshot (the groups as they were at submission, escalation), so it is
// judged here by the same Action.MayDecide the deciding transaction uses,
// not approximated in SQL; the scan reads pending actions only.
func (s *Service) listWaitingFor(ctx context.Context, r ListRequest) ([]*Action, string, error) {
	by, err := s.Staff().Decider(ctx, r.WaitingFor)
	if err != nil {
		return nil, "", err
	}
	scan := r
	scan.WaitingFor, scan.State, scan.Limit = "", StatePending, max(r.Limit, 100)
	var out []*Action
	for {
		page, next, err := s.List(ctx, scan)
		if err != nil {
			return nil, "", err
		}
		for _, a := range page {
			if !a.MayDecide(by) || a.Approved(by.By) {
				continue
			}
			if len(out) == r.Limit {
				// One more exists: the next page starts after the last one shown.
				last := out[len(out)-1]
				return out, EncodeCursor(Cursor{CreatedAt: last.CreatedAt, ID: last.ID}), nil
			}
			out = append(out, a)
		}
		if next == "" {
			return out, "", nil
		}
		scan.Cursor = next
	}
}

// EncodeCursor makes an opaque page cursor.
func EncodeCursor(c Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (Cursor, error) {
	bad := Errorf(CodeInvalidRequest, "cursor is not a cursor returned by this API")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return Cursor{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !ValidID(id) {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: t, ID: id}, nil
}

// ActionsByID reads the actions with these ids in one query, keyed by id;
// unknown ids are absent.
func ActionsByID(ctx context.Context, r Reader, ids []string) (map[string]*Action, error) {
	out := make(map[string]*Action, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := r.ActionList(ctx, ActionListParams{IDs: ids, Limit: len(ids)})
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		out[a.ID] = a
	}
	return out, nil
}

// Timeline returns an action's events, oldest first (at most 1000).
func Timeline(ctx context.Context, r Reader, actionID string) ([]Event, error) {
	evs, err := r.EventList(ctx, EventListParams{ActionID: actionID, Limit: 1000})
	if err != nil {
		return nil, err
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
	return evs, nil
}
