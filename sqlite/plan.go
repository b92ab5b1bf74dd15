package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Plans (queue.PlanStore) and the use of a plan's step by a submission
// (claimPlanStep, inside ActionSubmit's write transaction).

const planColumns = `id, title, agent, ordered, state, created_at, expires_at, approvals_required,
	approvals, decided_by, decided_at, decision_note, version, reminded_at, escalated_at`

// PlanInsert implements queue.Store.
func (s *Store) PlanInsert(ctx context.Context, p queue.PlanInsertParams) error {
	pl := p.Plan
	return s.withTx(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO plans (id, title, agent, ordered, state, created_at, expires_at,
			approvals_required, approvals, decided_by, decided_at, decision_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			pl.ID, pl.Title, pl.Agent, boolInt(pl.Ordered), string(pl.State), fmtTime(pl.CreatedAt), fmtTime(pl.ExpiresAt),
			pl.ApprovalsRequired, queue.ApprovalsJSON(pl.Approvals), nullString(pl.DecidedBy), nullTime(pl.DecidedAt),
			nullString(pl.DecisionNote)); err != nil {
			return fmt.Errorf("insert plan %s: %w", pl.ID, err)
		}
		for _, st := range pl.Steps {
			warnings, _ := json.Marshal(st.Warnings)
			var approval any
			if st.Approval != nil {
				b, err := json.Marshal(st.Approval)
				if err != nil {
					return fmt.Errorf("plan %s step %d: approval: %w", pl.ID, st.N, err)
				}
				approval = string(b)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO plan_steps (plan_id, n, tool, class, intent_key, payload, decision,
				rule, warnings, approval) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				pl.ID, st.N, st.Tool, string(st.Class), st.IntentKey, string(st.Payload), st.Decision, st.Rule,
				string(warnings), approval); err != nil {
				return fmt.Errorf("insert plan %s step %d: %w", pl.ID, st.N, err)
			}
		}
		ev := p.Event
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
			VALUES (NULL, nullif(?, ''), ?, ?, ?, ?, ?, ?)`,
			ev.Subject, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), boolInt(ev.Unrouted)); err != nil {
			return fmt.Errorf("plan %s: record %s: %w", pl.ID, ev.Kind, err)
		}
		return nil
	})
}

// PlanGetByID implements queue.Reader.
func (s *Store) PlanGetByID(ctx context.Context, id string) (*queue.Plan, error) {
	plans, err := s.readPlans(ctx, `SELECT `+planColumns+` FROM plans WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", id, err)
	}
	if len(plans) == 0 {
		return nil, queue.PlanNotFound(id)
	}
	return plans[0], nil
}

// PlanList implements queue.Reader: plans in the state p.State as
// queue.Plan.Settle reads it at p.Now (see PlanListParams).
func (s *Store) PlanList(ctx context.Context, p queue.PlanListParams) ([]*queue.Plan, error) {
	now := fmtTime(p.Now)
	var (
		where string
		args  []any
	)
	switch p.State {
	case "":
		where = `1`
	case queue.PlanPending:
		where, args = `p.state = 'pending' AND p.expires_at > ?`, []any{now}
	case queue.PlanApproved:
		where, args = `p.state = 'approved' AND p.expires_at > ? AND NOT `+planDone, []any{now}
	case queue.PlanDone:
		where = `p.state = 'approved' AND ` + planDone
	case queue.PlanExpired:
		where, args = `(p.state = 'expired' OR p.state IN ('pending', 'approved') AND p.expires_at <= ? AND NOT `+planDone+`)`, []any{now}
	default:
		where, args = `p.state = ?`, []any{string(p.State)}
	}
	if p.After != nil {
		at := fmtTime(p.After.CreatedAt)
		where += ` AND (p.created_at < ? OR p.created_at = ? AND p.id < ?)`
		args = append(args, at, at, p.After.ID)
	}
	args = append(args, p.Limit)
	plans, err := s.readPlans(ctx, `SELECT `+planColumns+` FROM plans p WHERE `+where+`
		ORDER BY p.created_at DESC, p.id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return plans, nil
}

// planDone holds for the plan p when every step's action is finished
// (queue.FinalStates): an approved plan so is done.
var planDone = `NOT EXISTS (SELECT 1 FROM plan_steps ds LEFT JOIN actions da ON da.id = ds.action_id
	WHERE ds.plan_id = p.id AND (da.id IS NULL OR da.state NOT IN (` + stateList(queue.FinalStates) + `)))`

// PlanExpireDue implements queue.Store: in one write transaction (the
// writer's lock: nothing writes between its update and its events), the
// due plans move to expired by one conditional update, each with a
// plan_expired event; a pending plan's is left for the outbox to fan out
// (plan.expired), an approved one's is not.
func (s *Store) PlanExpireDue(ctx context.Context, p queue.DueParams) ([]string, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("expire due plans: %w", queue.ErrNoEvent)
	}
	ev := p.Event
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	ts := fmtTime(p.Now)
	var ids []string
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		// The due plans and their states, read under the writer's lock:
		// only a pending plan's expiry is fanned out to the channels.
		rows, err := tx.QueryContext(ctx, `SELECT p.id, p.state FROM plans p
			WHERE p.state IN ('pending', 'approved') AND p.expires_at <= ?1 AND NOT `+planDone+`
			ORDER BY p.expires_at, p.id LIMIT ?2`, ts, limit)
		if err != nil {
			return err
		}
		var pending []bool
		for rows.Next() {
			var id, state string
			if err := rows.Scan(&id, &state); err != nil {
				rows.Close()
				return err
			}
			ids, pending = append(ids, id), append(pending, state == string(queue.PlanPending))
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE plans SET state = 'expired', version = version + 1,
				decided_by = CASE WHEN state = 'pending' THEN ?3 ELSE decided_by END,
				decided_at = CASE WHEN state = 'pending' THEN ?2 ELSE decided_at END
			WHERE id = ?1`, id, ts, ev.Actor); err != nil {
				return err
			}
			fanned := 1
			if pending[i] {
				fanned = 0
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
				VALUES (NULL, ?, ?, ?, ?, ?, ?, ?)`, queue.PlanActorPrefix+id, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At),
				nullJSON(ev.Data), fanned); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire due plans: %w", err)
	}
	return ids, nil
}

// readPlans reads plans and their steps in one read transaction.
func (s *Store) readPlans(ctx context.Context, query string, args ...any) ([]*queue.Plan, error) {
	var plans []*queue.Plan
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		plans = nil
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				pl                             queue.Plan
				ordered                        int
				state, created, expires, appr  string
				decidedBy, decidedAt, decision sql.NullString
				reminded, escalated            sql.NullString
			)
			if err := rows.Scan(&pl.ID, &pl.Title, &pl.Agent, &ordered, &state, &created, &expires, &pl.ApprovalsRequired,
				&appr, &decidedBy, &decidedAt, &decision, &pl.Version, &reminded, &escalated); err != nil {
				return err
			}
			if pl.RemindedAt, err = parseNullTime(reminded); err != nil {
				return err
			}
			if pl.EscalatedAt, err = parseNullTime(escalated); err != nil {
				return err
			}
			pl.Ordered, pl.State = ordered != 0, queue.PlanState(state)
			if pl.CreatedAt, err = parseTime(created); err != nil {
				return err
			}
			if pl.ExpiresAt, err = parseTime(expires); err != nil {
				return err
			}
			if pl.DecidedAt, err = parseNullTime(decidedAt); err != nil {
				return err
			}
			pl.DecidedBy, pl.DecisionNote = ptrString(decidedBy), ptrString(decision)
			if pl.Approvals, err = queue.DecodeApprovals([]byte(appr)); err != nil {
				return err
			}
			pl.Steps = []*queue.PlanStep{}
			plans = append(plans, &pl)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, pl := range plans {
			if err := readSteps(ctx, tx, pl); err != nil {
				return fmt.Errorf("plan %s: %w", pl.ID, err)
			}
		}
		return nil
	})
	return plans, err
}

// readSteps reads a plan's steps with their actions' states.
func readSteps(ctx context.Context, tx querier, pl *queue.Plan) error {
	rows, err := tx.QueryContext(ctx, `SELECT s.n, s.tool, s.class, s.intent_key, s.payload, s.decision, s.rule, s.warnings,
		s.approval, coalesce(s.action_id, ''), coalesce(a.state, ''),
		coalesce(t.id, ''), coalesce(t.kind, ''), coalesce(t.state, '')
		FROM plan_steps s LEFT JOIN actions a ON a.id = s.action_id
		LEFT JOIN tickets t ON t.id = (SELECT id FROM tickets WHERE action_id = s.action_id
			ORDER BY state = 'open' DESC, opened_at DESC, id DESC LIMIT 1)
		WHERE s.plan_id = ? ORDER BY s.n`, pl.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			st                                    queue.PlanStep
			class, payload, warnings, actionState string
			approval                              sql.NullString
			tk                                    queue.PlanStepTicket
		)
		if err := rows.Scan(&st.N, &st.Tool, &class, &st.IntentKey, &payload, &st.Decision, &st.Rule, &warnings,
			&approval, &st.ActionID, &actionState, &tk.ID, &tk.Kind, &tk.State); err != nil {
			return err
		}
		if tk.ID != "" {
			st.Ticket = &tk
		}
		st.Class, st.Payload, st.ActionState = classify.Class(class), json.RawMessage(payload), queue.State(actionState)
		if err := json.Unmarshal([]byte(warnings), &st.Warnings); err != nil {
			return fmt.Errorf("step %d: warnings: %w", st.N, err)
		}
		if approval.Valid {
			st.Approval = &classify.Approval{}
			if err := json.Unmarshal([]byte(approval.String), st.Approval); err != nil {
				return fmt.Errorf("step %d: approval: %w", st.N, err)
			}
		}
		pl.Steps = append(pl.Steps, &st)
	}
	return rows.Err()
}

// PlanUpdate implements queue.Store: one conditional update on the
// plan's version, with its event, in one write transaction.
func (s *Store) PlanUpdate(ctx context.Context, p queue.PlanUpdateParams) (*queue.Plan, error) {
	pl, ev := p.Plan, p.Event
	var n int64
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		n, err = rowsAffected(tx.ExecContext(ctx, `UPDATE plans SET state = ?, approvals = ?, decided_by = ?, decided_at = ?,
			decision_note = ?, version = version + 1
			WHERE id = ? AND version = ?
			  AND (NOT ? OR NOT EXISTS (SELECT 1 FROM plan_steps s WHERE s.plan_id = plans.id AND s.action_id IS NOT NULL))`,
			string(pl.State), queue.ApprovalsJSON(pl.Approvals), nullString(pl.DecidedBy), nullTime(pl.DecidedAt),
			nullString(pl.DecisionNote), pl.ID, p.Version, boolInt(p.Unused)))
		if err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
			VALUES (NULL, nullif(?, ''), ?, ?, ?, ?, ?, ?)`,
			ev.Subject, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), boolInt(ev.Unrouted))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update plan %s: %w", pl.ID, err)
	}
	got, err := s.PlanGetByID(ctx, pl.ID)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return got, fmt.Errorf("update plan %s: %w", pl.ID, queue.ErrStateMismatch)
	}
	return got, nil
}

// PlanRouteMark implements queue.Store: one conditional update with its
// event, in one write transaction.
func (s *Store) PlanRouteMark(ctx context.Context, p queue.PlanRouteMarkParams) (bool, error) {
	column := "reminded_at"
	if p.Escalate {
		column = "escalated_at"
	}
	ev := p.Event
	var n int64
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		n, err = rowsAffected(tx.ExecContext(ctx, `UPDATE plans SET `+column+` = ?
			WHERE id = ? AND state = 'pending' AND `+column+` IS ?`, fmtTime(p.Now), p.ID, nullTime(p.Prev)))
		if err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
			VALUES (NULL, nullif(?, ''), ?, ?, ?, ?, ?, ?)`,
			ev.Subject, ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), boolInt(ev.Unrouted))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%s of plan %s: %w", ev.Kind, p.ID, err)
	}
	return n == 1, nil
}

// errPlanStepRefused rolls back a submission whose plan step cannot be
// used.
var errPlanStepRefused = errors.New("plan step refused")

// claimPlanStep uses the step c for the action id, inside the
// submission's write transaction (the writer's lock: nothing else writes
// between its reads and its update): only while the plan is approved and
// unexpired, the step unused and, for an ordered plan, every earlier
// step's action done or recorded.
func claimPlanStep(ctx context.Context, tx querier, c *queue.PlanStepClaim, id string) error {
	n, err := rowsAffected(tx.ExecContext(ctx, `UPDATE plan_steps SET action_id = ?
		WHERE plan_id = ? AND n = ? AND action_id IS NULL
		  AND EXISTS (SELECT 1 FROM plans p WHERE p.id = plan_steps.plan_id AND p.state = 'approved' AND p.expires_at > ?
		      AND (NOT p.ordered OR NOT EXISTS (
		          SELECT 1 FROM plan_steps e LEFT JOIN actions a ON a.id = e.action_id
		          WHERE e.plan_id = p.id AND e.n < plan_steps.n AND (a.id IS NULL OR a.state NOT IN ('done', 'recorded')))))`,
		id, c.PlanID, c.N, fmtTime(c.Now)))
	if err != nil {
		return err
	}
	if n == 0 {
		return errPlanStepRefused
	}
	_, err = tx.ExecContext(ctx, `UPDATE plans SET version = version + 1 WHERE id = ?`, c.PlanID)
	return err
}
