package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Plans (queue.PlanStore) and the submission of a plan's step.

// PlanInsert implements queue.Store.
func (s *Store) PlanInsert(ctx context.Context, p queue.PlanInsertParams) error {
	pl := p.Plan
	return s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, planInsertSQL, pl.ID, pl.Title, pl.Agent, pl.Ordered, string(pl.State), pl.CreatedAt,
			pl.ExpiresAt, pl.ApprovalsRequired, queue.ApprovalsJSON(pl.Approvals), pl.DecidedBy, pl.DecidedAt, pl.DecisionNote); err != nil {
			return fmt.Errorf("insert plan %s: %w", pl.ID, err)
		}
		for _, st := range pl.Steps {
			warnings, _ := json.Marshal(st.Warnings)
			var approval *string
			if st.Approval != nil {
				b, err := json.Marshal(st.Approval)
				if err != nil {
					return fmt.Errorf("plan %s step %d: approval: %w", pl.ID, st.N, err)
				}
				a := string(b)
				approval = &a
			}
			if _, err := tx.Exec(ctx, planStepInsertSQL, pl.ID, st.N, st.Tool, string(st.Class), st.IntentKey,
				string(st.Payload), st.Decision, st.Rule, string(warnings), approval); err != nil {
				return fmt.Errorf("insert plan %s step %d: %w", pl.ID, st.N, err)
			}
		}
		ev := p.Event
		if _, err := tx.Exec(ctx, planEventInsertSQL, ev.Subject, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data), ev.Unrouted); err != nil {
			return fmt.Errorf("plan %s: record %s: %w", pl.ID, ev.Kind, err)
		}
		return nil
	})
}

// PlanGetByID implements queue.Reader.
func (s *Store) PlanGetByID(ctx context.Context, id string) (*queue.Plan, error) {
	if !queue.ValidID(id) {
		return nil, queue.PlanNotFound(id)
	}
	rows, err := s.pool.Query(ctx, planGetSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", id, err)
	}
	plans, err := s.plansWithSteps(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", id, err)
	}
	if len(plans) == 0 {
		return nil, queue.PlanNotFound(id)
	}
	return plans[0], nil
}

// PlanList implements queue.Reader.
func (s *Store) PlanList(ctx context.Context, p queue.PlanListParams) ([]*queue.Plan, error) {
	var (
		afterAt *time.Time
		afterID *string
	)
	if p.After != nil {
		if !queue.ValidID(p.After.ID) {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "cursor: %q is not an id", p.After.ID)
		}
		afterAt, afterID = &p.After.CreatedAt, &p.After.ID
	}
	rows, err := s.pool.Query(ctx, planListSQL, string(p.State), p.Now, p.Limit, afterAt, afterID)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	plans, err := s.plansWithSteps(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return plans, nil
}

// plansWithSteps scans plans and reads their steps.
func (s *Store) plansWithSteps(ctx context.Context, rows pgx.Rows) ([]*queue.Plan, error) {
	plans, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*queue.Plan, error) {
		var (
			pl        queue.Plan
			state     string
			approvals string
		)
		if err := row.Scan(&pl.ID, &pl.Title, &pl.Agent, &pl.Ordered, &state, &pl.CreatedAt, &pl.ExpiresAt,
			&pl.ApprovalsRequired, &approvals, &pl.DecidedBy, &pl.DecidedAt, &pl.DecisionNote, &pl.Version,
			&pl.RemindedAt, &pl.EscalatedAt); err != nil {
			return nil, err
		}
		utcp(pl.RemindedAt)
		utcp(pl.EscalatedAt)
		pl.State = queue.PlanState(state)
		var err error
		if pl.Approvals, err = queue.DecodeApprovals([]byte(approvals)); err != nil {
			return nil, err
		}
		pl.CreatedAt, pl.ExpiresAt = pl.CreatedAt.UTC(), pl.ExpiresAt.UTC()
		if pl.DecidedAt != nil {
			t := pl.DecidedAt.UTC()
			pl.DecidedAt = &t
		}
		pl.Steps = []*queue.PlanStep{}
		return &pl, nil
	})
	if err != nil || len(plans) == 0 {
		return plans, err
	}
	ids := make([]string, len(plans))
	byID := make(map[string]*queue.Plan, len(plans))
	for i, pl := range plans {
		ids[i], byID[pl.ID] = pl.ID, pl
	}
	srows, err := s.pool.Query(ctx, planStepsSQL, uuidArray(ids))
	if err != nil {
		return nil, err
	}
	defer srows.Close()
	for srows.Next() {
		var (
			planID, class, payload, warnings, actionState string
			approval                                      *string
			st                                            queue.PlanStep
			tk                                            queue.PlanStepTicket
		)
		if err := srows.Scan(&planID, &st.N, &st.Tool, &class, &st.IntentKey, &payload, &st.Decision, &st.Rule,
			&warnings, &approval, &st.ActionID, &actionState, &tk.ID, &tk.Kind, &tk.State); err != nil {
			return nil, err
		}
		if tk.ID != "" {
			st.Ticket = &tk
		}
		if err := decodeStep(&st, class, payload, warnings, approval, actionState); err != nil {
			return nil, fmt.Errorf("plan %s step %d: %w", planID, st.N, err)
		}
		if pl := byID[planID]; pl != nil {
			pl.Steps = append(pl.Steps, &st)
		}
	}
	return plans, srows.Err()
}

// decodeStep fills the step's columns stored as text.
func decodeStep(st *queue.PlanStep, class, payload, warnings string, approval *string, actionState string) error {
	st.Class, st.Payload, st.ActionState = classify.Class(class), json.RawMessage(payload), queue.State(actionState)
	if err := json.Unmarshal([]byte(warnings), &st.Warnings); err != nil {
		return fmt.Errorf("warnings: %w", err)
	}
	if approval != nil {
		st.Approval = &classify.Approval{}
		if err := json.Unmarshal([]byte(*approval), st.Approval); err != nil {
			return fmt.Errorf("approval: %w", err)
		}
	}
	return nil
}

// PlanUpdate implements queue.Store.
func (s *Store) PlanUpdate(ctx context.Context, p queue.PlanUpdateParams) (*queue.Plan, error) {
	pl, ev := p.Plan, p.Event
	var n int
	if err := s.pool.QueryRow(ctx, planUpdateSQL, pl.ID, p.Version, string(pl.State), queue.ApprovalsJSON(pl.Approvals),
		pl.DecidedBy, pl.DecidedAt, pl.DecisionNote, p.Unused,
		ev.Subject, ev.Kind, ev.Actor, ev.Channel, ev.At, jsonArg(ev.Data), ev.Unrouted).Scan(&n); err != nil {
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

// PlanExpireDue implements queue.Store.
func (s *Store) PlanExpireDue(ctx context.Context, p queue.DueParams) ([]string, error) {
	if p.Event.Kind == "" {
		return nil, fmt.Errorf("expire due plans: %w", queue.ErrNoEvent)
	}
	rows, err := s.pool.Query(ctx, planExpireDueSQL, dueArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("expire due plans: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("expire due plans: %w", err)
	}
	return ids, nil
}

// errPlanRollback ends a step's submission transaction without writing.
var errPlanRollback = errors.New("plan step: roll back")

// planSubmit is ActionSubmit of a plan's step: one transaction takes the
// plan's row (approved and unexpired), claims the intent as every
// submission does, and uses the step for the new action. Concurrent
// submissions of one plan's steps queue on the plan's row, so a step is
// used once; a held intent answers its holder and uses nothing.
func (s *Store) planSubmit(ctx context.Context, p queue.ActionSubmitParams, in submitInput) (queue.ActionSubmitResult, error) {
	a, claim := p.Action, p.PlanStep
	var res queue.ActionSubmitResult
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		res = queue.ActionSubmitResult{}
		var ordered bool
		err := tx.QueryRow(ctx, planLockSQL, claim.PlanID, claim.Now).Scan(&ordered)
		if errors.Is(err, pgx.ErrNoRows) {
			res.PlanStepRefused = true
			return errPlanRollback
		}
		if err != nil {
			return err
		}
		in, err := pickGrant(ctx, tx, p, in)
		if err != nil {
			return err
		}
		var got submitted
		for range 10 {
			v, err := scanSubmitted(tx.QueryRow(ctx, submitSQL, in.args()...))
			if errors.Is(err, pgx.ErrNoRows) {
				if in.tokenHash != nil {
					if ok, terr := tokenActive(ctx, tx, *in.tokenHash); terr != nil || !ok {
						if terr != nil {
							return terr
						}
						return queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
					}
				}
				continue // a holder this statement's snapshot could not see
			}
			if err != nil {
				return err
			}
			got = v.(submitted)
			break
		}
		if got.action == nil {
			return fmt.Errorf("intent changed hands too often; try again")
		}
		if !got.created {
			res = queue.ActionSubmitResult{Holder: got.action, ReplayRecorded: got.replayWritten, UnderReview: !got.action.HoldsIntent()}
			if got.replayWritten {
				return nil // keep the replay's record; nothing else was written
			}
			return errPlanRollback
		}
		tag, err := tx.Exec(ctx, planStepClaimSQL, claim.PlanID, claim.N, a.ID, ordered)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			res.PlanStepRefused = true
			return errPlanRollback
		}
		a.Attempt = got.action.Attempt
		res = queue.ActionSubmitResult{Holder: got.action, Created: true}
		return nil
	})
	if err != nil && !errors.Is(err, errPlanRollback) {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit %s as step %d of plan %s: %w", a.IntentKey, claim.N, claim.PlanID, err)
	}
	return res, nil
}

// tokenActive reports whether an active agent token has hash.
func tokenActive(ctx context.Context, tx pgx.Tx, hash string) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, planTokenActiveSQL, hash).Scan(&ok)
	return ok, err
}

// PlanRouteMark implements queue.Store: one conditional update with its
// event, in one statement.
func (s *Store) PlanRouteMark(ctx context.Context, p queue.PlanRouteMarkParams) (bool, error) {
	q := planRemindMarkSQL
	if p.Escalate {
		q = planEscalateMarkSQL
	}
	ev := p.Event
	var n int
	if err := s.pool.QueryRow(ctx, q, p.ID, p.Now, p.Prev, ev.Subject, ev.Kind, ev.Actor, ev.Unrouted).Scan(&n); err != nil {
		return false, fmt.Errorf("%s of plan %s: %w", ev.Kind, p.ID, err)
	}
	return n == 1, nil
}
