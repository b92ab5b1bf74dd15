package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

const actionColumns = `id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
	requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
	finished_at, expires_at, spec, warnings, approvals, escalated_at`

type scanner interface{ Scan(dest ...any) error }

// actionRow is an actions row as stored (actionColumns), before decoding.
// A write call scans into it inside the write transaction and decodes it
// (times, JSON of the tool snapshot, warnings and approvals) after the
// commit, outside the writer's critical section.
type actionRow struct {
	id, tool, class, intentKey       string
	attempt                          int
	state, payload, spec, warnings   string
	createdAt, approvals             string
	approved, result, errText        sql.NullString
	requestedBy, channel             string
	decidedBy, note, claimedBy       sql.NullString
	decidedAt, claimedAt, finishedAt sql.NullString
	expiresAt, escalatedAt           sql.NullString
}

func (r *actionRow) scan(sc scanner) error {
	return sc.Scan(&r.id, &r.tool, &r.class, &r.intentKey, &r.attempt, &r.state, &r.payload, &r.approved, &r.result,
		&r.errText, &r.requestedBy, &r.channel, &r.decidedBy, &r.note, &r.createdAt, &r.decidedAt, &r.claimedAt,
		&r.claimedBy, &r.finishedAt, &r.expiresAt, &r.spec, &r.warnings, &r.approvals, &r.escalatedAt)
}

// action decodes the row.
func (r *actionRow) action() (*queue.Action, error) {
	a := queue.Action{ID: r.id, Tool: r.tool, IntentKey: r.intentKey, Attempt: r.attempt,
		RequestedBy: r.requestedBy, Channel: r.channel}
	a.Class = classify.Class(r.class)
	a.State = queue.State(r.state)
	a.Payload = json.RawMessage(r.payload)
	a.ApprovedPayload = rawJSON(r.approved)
	a.Result = rawJSON(r.result)
	a.Error = ptrString(r.errText)
	a.DecidedBy = ptrString(r.decidedBy)
	a.DecisionNote = ptrString(r.note)
	a.ClaimedBy = ptrString(r.claimedBy)
	var err error
	if a.CreatedAt, err = parseTime(r.createdAt); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		dst **time.Time
		src sql.NullString
	}{{&a.DecidedAt, r.decidedAt}, {&a.ClaimedAt, r.claimedAt}, {&a.FinishedAt, r.finishedAt}, {&a.ExpiresAt, r.expiresAt}, {&a.EscalatedAt, r.escalatedAt}} {
		if *f.dst, err = parseNullTime(f.src); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal([]byte(r.spec), &a.Spec); err != nil {
		return nil, fmt.Errorf("action %s: stored tool definition: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(r.warnings), &a.Warnings); err != nil {
		return nil, fmt.Errorf("action %s: stored warnings: %w", a.ID, err)
	}
	if a.Approvals, err = queue.DecodeApprovals([]byte(r.approvals)); err != nil {
		return nil, fmt.Errorf("action %s: stored approvals: %w", a.ID, err)
	}
	a.ApprovalsRequired = a.Spec.Approval.RequiredApprovals()
	return &a, nil
}

func scanAction(sc scanner) (*queue.Action, error) {
	var r actionRow
	if err := r.scan(sc); err != nil {
		return nil, err
	}
	return r.action()
}

// getAction reads one action without its ticket.
func getAction(ctx context.Context, q querier, id string) (*queue.Action, error) {
	a, err := scanAction(q.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, queue.ActionNotFound(id)
	}
	return a, err
}

// actionTicket returns the ticket attachTickets would attach to the action
// id (its open ticket if any, else its most recent one), or nil. One row by
// the tickets_action index, in a statement the writer keeps prepared.
func actionTicket(ctx context.Context, q querier, id string) (*queue.Ticket, error) {
	t, err := scanTicket(q.QueryRowContext(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE action_id = ?
		ORDER BY state = 'open' DESC, opened_at DESC, id DESC LIMIT 1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

// getActionWithTicket reads one action and attaches its ticket.
func getActionWithTicket(ctx context.Context, q querier, id string) (*queue.Action, error) {
	a, err := getAction(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if a.Ticket, err = actionTicket(ctx, q, id); err != nil {
		return nil, err
	}
	return a, nil
}

// ActionSubmit inserts a as the holder of its intent (claim-first). The
// insert itself computes the attempt and is refused by the partial unique
// index actions_held_intent when the key is held; only then is the holder
// read. The insert returns the stored row (RETURNING), so a new action is
// not read again; the row is decoded after the commit, outside the
// writer, which serialises every write of the store.
func (s *Store) ActionSubmit(ctx context.Context, p queue.ActionSubmitParams) (queue.ActionSubmitResult, error) {
	a, ev := p.Action, p.Event
	if p.TokenHash != "" {
		// SupportsTokenGuard is false: the caller must look the token up.
		return queue.ActionSubmitResult{}, errors.New("submit action: this store cannot check agent tokens in its statements")
	}
	if a == nil {
		return queue.ActionSubmitResult{}, errors.New("submit action: nil action")
	}
	spec, err := json.Marshal(a.Spec)
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: tool definition: %w", a.ID, err)
	}
	warnings := []byte("[]")
	if len(a.Warnings) > 0 {
		if warnings, err = json.Marshal(a.Warnings); err != nil {
			return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: warnings: %w", a.ID, err)
		}
	}
	if err := storableTimes(&a.CreatedAt, a.DecidedAt, a.ClaimedAt, a.FinishedAt, a.ExpiresAt); err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", a.ID, err)
	}
	// An exactly-once action is claimed by its submission; the deadline
	// follows from the snapshot's claim_timeout.
	var claimedAt, claimDeadline any
	if a.ClaimedAt != nil {
		claimedAt = fmtTime(*a.ClaimedAt)
		claimDeadline = fmtTime(*a.ClaimDeadline())
	}
	// Recorded (at-least-once) actions hold nothing: attempt 1, always.
	attemptExpr := `1`
	if a.Class != classify.AtLeastOnce {
		attemptExpr = `(SELECT COALESCE(MAX(attempt), 0) + 1 FROM actions WHERE intent_key = ?3 AND class <> 'at-least-once')`
	}
	insert := `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, approved_payload, result,
		error, requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
		claim_deadline, finished_at, expires_at, has_webhook, spec, warnings)
	VALUES (?1, ?2, ?4, ?3, ` + attemptExpr + `, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
		?18, ?19, ?20, ?21, ?22, ?23)
	ON CONFLICT DO NOTHING
	RETURNING ` + actionColumns
	args := []any{a.ID, a.Tool, a.IntentKey, string(a.Class), string(a.State), string(a.Payload),
		nullJSON(a.ApprovedPayload), nullJSON(a.Result), nullString(a.Error), a.RequestedBy, a.Channel,
		nullString(a.DecidedBy), nullString(a.DecisionNote), fmtTime(a.CreatedAt), nullTime(a.DecidedAt),
		claimedAt, nullString(a.ClaimedBy), claimDeadline, nullTime(a.FinishedAt), nullTime(a.ExpiresAt),
		boolInt(a.ServerExecuted()), string(spec), string(warnings)}

	var (
		row     actionRow
		ticket  *queue.Ticket
		created bool
	)
	err = s.withTx(ctx, func(ctx context.Context, tx querier) error {
		ticket, created = nil, false
		err := row.scan(tx.QueryRowContext(ctx, insert, args...))
		if err == nil {
			ev.ActionID = a.ID
			if ev.At.IsZero() {
				ev.At = a.CreatedAt
			}
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
			// A new action has no ticket.
			created = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if a.Class != classify.AtLeastOnce {
			err := row.scan(tx.QueryRowContext(ctx, heldActionQuery, a.IntentKey))
			if err == nil {
				ticket, err = actionTicket(ctx, tx, row.id)
				return err
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		// No holder inside this immediate transaction: the conflict was on
		// the action id itself.
		if existing, err := getAction(ctx, tx, a.ID); err == nil {
			return fmt.Errorf("action id %s is already taken by intent %q", a.ID, existing.IntentKey)
		}
		return fmt.Errorf("intent %q: insert refused and no holder found", a.IntentKey)
	})
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", a.ID, err)
	}
	// A new row decodes (storableTimes checked its times; spec and
	// warnings are json.Marshal's output): an error here is a holder's.
	holder, err := row.action()
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", a.ID, err)
	}
	holder.Ticket = ticket
	if created {
		a.Attempt = holder.Attempt
		if holder.State == queue.StatePending {
			// Only new approvals are announced; nobody waits for a new claim
			// or a recording (the PostgreSQL store notifies the same).
			s.hub.Publish(queue.Change{ActionID: holder.ID, State: holder.State})
		}
	}
	// The Service records replays: the statement above reads, it does not
	// write them.
	return queue.ActionSubmitResult{Holder: holder, Created: created}, nil
}

// storableTimes refuses times that timeLayout cannot write and read back
// (years outside 0-9999) before they are stored: a written row is decoded
// only after its commit, where a failure could no longer undo the write.
func storableTimes(times ...*time.Time) error {
	for _, t := range times {
		if t != nil {
			if y := t.UTC().Year(); y < 0 || y > 9999 {
				return fmt.Errorf("time %s cannot be stored", t)
			}
		}
	}
	return nil
}

// heldStates is queue.HeldStates as an SQL list.
var heldStates = "'" + strings.Join(func() []string {
	out := make([]string, len(queue.HeldStates))
	for i, st := range queue.HeldStates {
		out[i] = string(st)
	}
	return out
}(), "', '") + "'"

// heldActionQuery reads the action holding the intent key ?. Its condition
// spells out the predicate of actions_held_intent term for term (an
// at-least-once action holds nothing, whatever its state): SQLite uses a
// partial index only when each term of the index's WHERE appears in the
// query's (TestHeldActionQueryUsesHeldIntentIndex).
var heldActionQuery = `SELECT ` + actionColumns + ` FROM actions
	WHERE intent_key = ? AND state IN (` + heldStates + `) AND class <> 'at-least-once'`

// ActionGetByID returns the action with its ticket.
func (s *Store) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	var a *queue.Action
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = getActionWithTicket(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get action: %w", err)
	}
	return a, nil
}

// globEscape quotes the GLOB metacharacters of a literal prefix. GLOB, unlike
// SQLite's LIKE, is case-sensitive (as LIKE is on PostgreSQL) and can use the
// BINARY index on intent_key for a prefix.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[':
			b.WriteByte('[')
			b.WriteRune(r)
			b.WriteByte(']')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ActionList returns actions matching p in (created_at, id) order.
func (s *Store) ActionList(ctx context.Context, p queue.ActionListParams) ([]*queue.Action, error) {
	var (
		where []string
		args  []any
	)
	if p.IDs != nil {
		if len(p.IDs) == 0 {
			where = append(where, `0`)
		} else {
			where = append(where, `id IN (`+placeholders(len(p.IDs))+`)`)
			for _, id := range p.IDs {
				args = append(args, id)
			}
		}
	}
	if p.IntentKey != "" {
		where = append(where, `intent_key = ?`)
		args = append(args, p.IntentKey)
	}
	if p.IntentKeyPrefix != "" {
		where = append(where, `intent_key GLOB ?`)
		args = append(args, globEscape(p.IntentKeyPrefix)+"*")
	}
	if p.State != "" {
		where = append(where, `state = ?`)
		args = append(args, string(p.State))
	}
	if p.Tool != "" {
		where = append(where, `tool = ?`)
		args = append(args, p.Tool)
	}
	if p.ServerExecuted {
		where = append(where, `has_webhook = 1`)
	}
	if p.Held {
		// actions_held_intent's predicate, term for term.
		where = append(where, `state IN (`+heldStates+`) AND class <> 'at-least-once'`)
	}
	dir, cmp := "DESC", "<"
	if p.Oldest {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, `(created_at, id) `+cmp+` (?, ?)`)
		args = append(args, fmtTime(p.After.CreatedAt), p.After.ID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	query := `SELECT ` + actionColumns + ` FROM actions`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY created_at ` + dir + `, id ` + dir + ` LIMIT ?`
	args = append(args, limit)

	var list []*queue.Action
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		if list, err = queryActions(ctx, tx, query, args...); err != nil {
			return err
		}
		return attachTickets(ctx, tx, list)
	})
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return list, nil
}

func queryActions(ctx context.Context, q querier, query string, args ...any) ([]*queue.Action, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []*queue.Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, a)
	}
	return list, rows.Err()
}

// ActionTransition moves one action in one conditional update.
func (s *Store) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if len(p.From) == 0 || !p.To.Valid() {
		return nil, fmt.Errorf("transition action %s: from %v to %q is not a transition", p.ID, p.From, p.To)
	}
	if p.TokenHash != "" {
		// SupportsTokenGuard is false: the caller must look the token up.
		return nil, fmt.Errorf("transition action %s: this store cannot check an agent token in the transition", p.ID)
	}
	if err := storableTimes(p.DecidedAt, p.ClaimedAt, p.FinishedAt, p.ExpiresAt); err != nil {
		return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
	}
	args := []any{string(p.To),
		nullString(p.DecidedBy), nullString(p.DecisionNote), nullTime(p.DecidedAt),
		nullJSON(p.ApprovedPayload), nullJSON(p.Result), nullString(p.Error),
		nullTime(p.ClaimedAt), nullString(p.ClaimedBy), nullTime(p.ClaimDeadline),
		nullTime(p.FinishedAt), nullTime(p.ExpiresAt), p.ID}
	for _, f := range p.From {
		args = append(args, string(f))
	}
	query := `UPDATE actions SET state = ?,
		decided_by = COALESCE(?, decided_by), decision_note = COALESCE(?, decision_note),
		decided_at = COALESCE(?, decided_at), approved_payload = COALESCE(?, approved_payload),
		result = COALESCE(?, result), error = COALESCE(?, error),
		claimed_at = COALESCE(?, claimed_at), claimed_by = COALESCE(?, claimed_by),
		claim_deadline = COALESCE(?, claim_deadline), finished_at = COALESCE(?, finished_at),
		expires_at = COALESCE(?, expires_at)
	WHERE id = ? AND state IN (` + placeholders(len(p.From)) + `)`
	if p.Unexpired {
		// After expires_at an approval can no longer be given, whether or
		// not the sweep has run.
		query += ` AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, fmtTime(p.Now))
	}
	if p.RequestedBy != "" {
		query += ` AND requested_by = ?`
		args = append(args, p.RequestedBy)
	}
	if p.AgentExecuted {
		query += ` AND NOT has_webhook`
	}
	// The updated row as stored: nothing below changes it (the event and
	// the stale ticket are rows of their own).
	query += ` RETURNING ` + actionColumns

	var (
		row      actionRow
		ticket   *queue.Ticket
		a        *queue.Action
		mismatch bool
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		a, ticket, mismatch = nil, nil, false
		err := row.scan(tx.QueryRowContext(ctx, query, args...))
		if errors.Is(err, sql.ErrNoRows) {
			if a, err = getActionWithTicket(ctx, tx, p.ID); err != nil {
				return err
			}
			mismatch = true
			return nil // nothing was written; commit is as good as rollback
		}
		if err != nil {
			return err
		}
		ev := p.Event
		ev.ActionID = p.ID
		if ev.At.IsZero() {
			ev.At = p.Now
		}
		if ev.Kind != "" {
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		if p.ResolveStaleTicket {
			if err := resolveStaleTicket(ctx, tx, p.ID, p.To, ev); err != nil {
				return err
			}
		}
		ticket, err = actionTicket(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
	}
	if !mismatch {
		// Decoded after the commit, outside the writer. Its new times were
		// checked above; the rest (tool snapshot, warnings, approvals) this
		// store wrote as JSON it encoded, and the update did not touch it.
		if a, err = row.action(); err != nil {
			return nil, fmt.Errorf("transition action %s to %s: %w", p.ID, p.To, err)
		}
		a.Ticket = ticket
	}
	if mismatch {
		return a, fmt.Errorf("transition action %s from %v to %s: it is %s: %w", p.ID, p.From, p.To, a.State, queue.ErrStateMismatch)
	}
	s.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
	return a, nil
}

// resolveStaleTicket resolves the action's open stale ticket, if any: a late
// report from the agent settles what the operator would have checked.
func resolveStaleTicket(ctx context.Context, tx querier, actionID string, to queue.State, report queue.Event) error {
	by, at := report.Actor, report.At
	var outcome any
	if to == queue.StateDone || to == queue.StateFailed {
		outcome = string(to)
	}
	const note = queue.LateReportNote
	var ticketID string
	err := tx.QueryRowContext(ctx, `UPDATE tickets SET state = 'resolved', resolved_at = ?, resolved_by = ?,
		outcome = ?, note = ?
	WHERE action_id = ? AND kind = 'stale' AND state = 'open' RETURNING id`,
		fmtTime(at), by, outcome, note, actionID).Scan(&ticketID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	// The report's channel, as on PostgreSQL: the agent resolved it.
	_, err = insertEvent(ctx, tx, queue.Event{ActionID: actionID, Kind: queue.EventTicketResolved, Actor: by,
		Channel: report.Channel, At: at, Data: queue.TicketEventData(ticketID, queue.TicketStale, to, note, nil)})
	return err
}

// ActionExpireDue expires pending and approved actions whose expires_at has
// passed, in one conditional update.
func (s *Store) ActionExpireDue(ctx context.Context, p queue.DueParams) ([]*queue.Action, error) {
	now, limit := p.Now, p.Limit
	if limit <= 0 {
		limit = 100
	}
	ts := fmtTime(now)
	var list []*queue.Action
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		list = nil
		// An expired pending action was decided by the system; an approved
		// one keeps the decision of the human who approved it.
		rows, err := tx.QueryContext(ctx, `UPDATE actions SET state = 'expired',
			decided_by = CASE WHEN state = 'pending' THEN 'system' ELSE decided_by END,
			decided_at = CASE WHEN state = 'pending' THEN ?1 ELSE decided_at END,
			finished_at = ?1
		WHERE id IN (SELECT id FROM actions WHERE state IN ('pending', 'approved') AND expires_at <= ?1
		             ORDER BY expires_at, id LIMIT ?2)
		  AND state IN ('pending', 'approved') AND expires_at <= ?1
		RETURNING id`, ts, limit)
		if err != nil {
			return err
		}
		ids, err := scanIDs(rows)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := insertEvent(ctx, tx, queue.Event{ActionID: id, Kind: queue.EventExpired, Actor: "system", At: now}); err != nil {
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

// ActionCountByState counts actions per state.
func (s *Store) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT state, count(*) FROM actions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	defer rows.Close()
	counts := make(map[queue.State]int64)
	for rows.Next() {
		var (
			state string
			n     int64
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count actions: %w", err)
		}
		counts[queue.State(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	return counts, nil
}
