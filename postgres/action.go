package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

type rowScanner interface{ Scan(dest ...any) error }

// actionRowColumns is how many columns an action row has: the fragments
// actionColumns and ticketColumns of sql/columns.sql.
const actionRowColumns = 33

// scanAction scans an action row followed by the extra columns given. The
// destinations are gathered in one slice, with the call's index first when
// row is a merged statement's (indexedRow): a submission's answer is
// scanned once per request, and each wrapper appending its own columns cost
// a slice of its own.
func scanAction(row rowScanner, extra ...any) (*queue.Action, error) {
	var a queue.Action
	c := new(actionScan)
	dest := make([]any, 0, 1+actionRowColumns+len(extra))
	if ir, ok := row.(indexedRow); ok {
		dest, row = append(dest, ir.index), ir.rows
	}
	dest = append(dest, &a.ID, &a.Tool, &c.class, &a.IntentKey, &a.Attempt, &c.state, &c.payload,
		&c.approved, &c.result, &a.Error, &a.RequestedBy, &a.Channel, &a.DecidedBy,
		&a.DecisionNote, &a.CreatedAt, &a.DecidedAt, &a.ClaimedAt, &a.ClaimedBy, &a.FinishedAt,
		&a.ExpiresAt, &c.spec, &c.warnings, &c.approvals, &a.EscalatedAt, &c.grantID,
		&c.tID, &c.tKind, &c.tState, &c.tOpened, &c.tResolved, &c.tBy, &c.tOutcome, &c.tNote)
	err := row.Scan(append(dest, extra...)...)
	if err != nil {
		return nil, err
	}
	a.Class = classify.Class(c.class)
	a.State = queue.State(c.state)
	if c.grantID != nil {
		a.GrantID = *c.grantID
	}
	a.Payload = json.RawMessage(c.payload)
	a.ApprovedPayload = nullableJSON(c.approved)
	a.Result = nullableJSON(c.result)
	if a.Spec, err = decodeSpec(c.spec); err != nil {
		return nil, fmt.Errorf("decode tool snapshot of action %s: %w", a.ID, err)
	}
	if string(c.warnings) == "[]" {
		// Most actions have none; skip the decoder.
		a.Warnings = []string{}
	} else if err := json.Unmarshal(c.warnings, &a.Warnings); err != nil {
		return nil, fmt.Errorf("decode warnings of action %s: %w", a.ID, err)
	}
	if a.Warnings == nil {
		a.Warnings = []string{}
	}
	if a.Approvals, err = queue.DecodeApprovals(c.approvals); err != nil {
		return nil, fmt.Errorf("decode approvals of action %s: %w", a.ID, err)
	}
	a.ApprovalsRequired = a.Spec.Approval.RequiredApprovals()
	utc(&a.CreatedAt)
	utcp(a.DecidedAt, a.ClaimedAt, a.FinishedAt, a.ExpiresAt, a.EscalatedAt)
	if c.tID != nil {
		t := &queue.Ticket{ID: *c.tID, ActionID: a.ID, Kind: queue.TicketKind(*c.tKind),
			State: queue.TicketState(*c.tState), OpenedAt: c.tOpened.UTC(), ResolvedAt: c.tResolved,
			ResolvedBy: c.tBy, Note: c.tNote}
		utcp(t.ResolvedAt)
		if c.tOutcome != nil {
			o := queue.State(*c.tOutcome)
			t.Outcome = &o
		}
		a.Ticket = t
	}
	return &a, nil
}

// actionScan holds the columns of an action row that scanAction converts
// before they become the action's, in one allocation: a local variable
// whose address goes into the destinations is an allocation of its own.
type actionScan struct {
	class, state                              string
	payload, approved, result, spec, warnings []byte
	approvals                                 []byte
	tID, tKind, tState, tBy, tOutcome, tNote  *string
	grantID                                   *string
	tOpened, tResolved                        *time.Time
}

// specs caches decoded tool snapshots. Every action stores the snapshot of
// its tool, so a table holds few distinct ones, and decoding the same JSON
// for every row read was the largest single cost of reading actions. The
// decoded values are shared: nothing modifies a snapshot after decoding.
var specs = struct {
	sync.Mutex
	m map[string]classify.Tool
}{m: map[string]classify.Tool{}}

func decodeSpec(b []byte) (classify.Tool, error) {
	specs.Lock()
	t, ok := specs.m[string(b)]
	specs.Unlock()
	if ok {
		return t, nil
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return classify.Tool{}, err
	}
	specs.Lock()
	if len(specs.m) >= 1024 {
		clear(specs.m) // tools files change rarely; start over
	}
	specs.m[string(b)] = t
	specs.Unlock()
	return t, nil
}

func nullableJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func utc(t *time.Time) { *t = t.UTC() }

func utcp(ts ...*time.Time) {
	for _, t := range ts {
		if t != nil {
			*t = t.UTC()
		}
	}
}

func jsonArg(m json.RawMessage) any {
	if m == nil {
		return nil
	}
	return string(m)
}

// ActionGetByID implements queue.Store.
func (s *Store) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	if !queue.ValidID(id) {
		return nil, queue.ActionNotFound(id)
	}
	a, err := scanAction(s.pool.QueryRow(ctx, actionGetByIDSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.ActionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get action %s: %w", id, err)
	}
	return a, nil
}

// ActionList implements queue.Store.
func (s *Store) ActionList(ctx context.Context, p queue.ActionListParams) ([]*queue.Action, error) {
	q, args := actionListSQL(p)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	out, err := collectActions(rows)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// collectActions reads every row of rows (columns as actionListSelect's)
// and closes it.
func collectActions(rows pgx.Rows) ([]*queue.Action, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*queue.Action, error) { return scanAction(row) })
}

// actionListSQL builds ActionList's statement: only the filters p sets
// become conditions, so each combination gets a plan of its own that uses
// the index for it (testdata/action_list.golden shows them).
func actionListSQL(p queue.ActionListParams) (string, []any) {
	var (
		where []string
		args  sqlArgs
	)
	arg := args.add
	if p.IDs != nil {
		ids := make([]string, 0, len(p.IDs))
		for _, id := range p.IDs {
			if queue.ValidID(id) {
				ids = append(ids, id)
			}
		}
		where = append(where, "a.id = ANY("+arg(uuidArray(ids))+"::uuid[])")
	}
	// The keys are in two indexes by class (migration 00030): the unique
	// index of attempts holds every class but at-least-once,
	// actions_intent_prefix_recorded the rest. A condition on the key has
	// an arm for each, naming its class, so the planner can prove each
	// index's predicate and read both. The value is given twice: one
	// parameter in both arms would be taken out of the OR as a common
	// factor, and the arms left without an indexable condition.
	byClass := func(cond string, v any) string {
		return "((a.class <> 'at-least-once' AND a.intent_key " + cond + " " + arg(v) +
			") OR (a.class = 'at-least-once' AND a.intent_key " + cond + " " + arg(v) + "))"
	}
	if p.IntentKey != "" {
		where = append(where, byClass("=", p.IntentKey))
	}
	if p.IntentKeyPrefix != "" {
		where = append(where, byClass("LIKE", likePrefix(p.IntentKeyPrefix)))
	}
	if p.State != "" {
		// A known state is written as a literal, so the plan of each state
		// is its own and the planner can prove a partial index's predicate
		// (actions_state_listed holds only the states that are few:
		// migration 00023); a parameter's generic plan could not use it.
		if p.State.Valid() {
			where = append(where, "a.state = '"+string(p.State)+"'")
		} else {
			where = append(where, "a.state = "+arg(string(p.State)))
		}
	}
	if p.Tool != "" {
		where = append(where, "a.tool = "+arg(p.Tool))
	}
	if p.ServerExecuted {
		where = append(where, "a.has_webhook")
	}
	if p.Held {
		where = append(where, heldWhere)
	}
	if p.GrantID != "" {
		if !queue.ValidID(p.GrantID) {
			where = append(where, "false")
		} else {
			where = append(where, "a.grant_id = "+arg(p.GrantID)+"::uuid")
		}
	}
	order, cmp := "DESC", "<"
	if p.Oldest {
		order, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(a.created_at, a.id) %s (%s, %s::uuid)", cmp, arg(p.After.CreatedAt), arg(p.After.ID)))
	}
	q := actionListSelect
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	q += fmt.Sprintf("\nORDER BY a.created_at %s, a.id %s LIMIT %s", order, order, arg(limit))
	return q, args
}

func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// ActionCountByState implements queue.Store.
func (s *Store) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	rows, err := s.pool.Query(ctx, actionCountByStateSQL)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	defer rows.Close()
	out := map[queue.State]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[queue.State(st)] = n
	}
	return out, rows.Err()
}
