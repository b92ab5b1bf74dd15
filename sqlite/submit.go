package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// ActionSubmit inserts a as the holder of its intent (claim-first). The
// insert itself computes the attempt and is refused by the partial unique
// index actions_held_intent when the key is held; only then is the holder
// read. The insert returns the stored row (RETURNING), so a new action is
// not read again; the row is decoded after the commit, outside the
// writer, which serialises every write of the store.
//
// A conflict holds its intent: inside the same transaction, before the
// insert, a conflict ticket open on the key's latest attempt that holds
// nothing refuses the submission (UnderReview); the writer's lock keeps
// a ticket from opening between the check and the insert.
//
// With p.Grant, a grant that matches the pending action approves it in the
// same transaction: the writer's lock is held from the first statement, so
// the grant read, its conditional use and the insert see no other writer.
// A grant is used only once the insert took the intent.
func (s *Store) ActionSubmit(ctx context.Context, p queue.ActionSubmitParams) (queue.ActionSubmitResult, error) {
	if p.TokenHash != "" {
		// SupportsTokenGuard is false: the caller must look the token up.
		return queue.ActionSubmitResult{}, errors.New("submit action: this store cannot check agent tokens in its statements")
	}
	if p.Action == nil {
		return queue.ActionSubmitResult{}, errors.New("submit action: nil action")
	}
	given := *p.Action
	spec, err := json.Marshal(given.Spec)
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: tool definition: %w", given.ID, err)
	}
	warnings := []byte("[]")
	if len(given.Warnings) > 0 {
		if warnings, err = json.Marshal(given.Warnings); err != nil {
			return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: warnings: %w", given.ID, err)
		}
	}
	if err := storableTimes(&given.CreatedAt, given.DecidedAt, given.ClaimedAt, given.FinishedAt, given.ExpiresAt); err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", given.ID, err)
	}
	var grantTry *queue.GrantTry
	if p.Grant != nil && given.State == queue.StatePending {
		grantTry = p.Grant
		if err := storableTimes(&grantTry.ExpiresAt); err != nil {
			return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", given.ID, err)
		}
	}
	// Recorded (at-least-once) actions hold nothing: attempt 1, always.
	attemptExpr := `1`
	if given.Class != classify.AtLeastOnce {
		attemptExpr = `(SELECT COALESCE(MAX(attempt), 0) + 1 FROM actions WHERE intent_key = ?3 AND class <> 'at-least-once')`
	}
	insert := `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, approved_payload, result,
		error, requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
		claim_deadline, finished_at, expires_at, has_webhook, spec, warnings, approvals, grant_id)
	VALUES (?1, ?2, ?4, ?3, ` + attemptExpr + `, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
		?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)
	ON CONFLICT DO NOTHING
	RETURNING ` + actionColumns

	var (
		row           actionRow
		ticket        *queue.Ticket
		created       bool
		underReviewed bool
	)
	err = s.withTx(ctx, func(ctx context.Context, tx querier) error {
		ticket, created, underReviewed = nil, false, false
		a := given // each run starts from the action as given
		if a.Class != classify.AtLeastOnce {
			latest, tk, err := underReview(ctx, tx, a.IntentKey)
			if err != nil {
				return err
			}
			if latest != nil {
				row, ticket, underReviewed = *latest, tk, true
				return nil
			}
		}
		ev := p.Event
		var (
			grant    *queue.Grant
			approved queue.Event
		)
		if grantTry != nil {
			g, err := findGrant(ctx, tx, queue.GrantFindParams{Tool: a.Tool, RequestedBy: a.RequestedBy, Payload: a.Payload, Now: grantTry.Now,
				Approval: a.Spec.Approval})
			if err != nil && queue.ErrorCode(err) != queue.CodeNotFound {
				return err
			}
			if g != nil {
				grant = g
				approved = queue.ApproveByGrant(&a, &ev, g, grantTry)
			}
		}
		err := row.scan(tx.QueryRowContext(ctx, insert, insertArgs(&a, string(spec), string(warnings))...))
		if err == nil && p.PlanStep != nil {
			// The action exists now, so the step can name it; a refusal
			// rolls the insert back.
			if err := claimPlanStep(ctx, tx, p.PlanStep, a.ID); err != nil {
				return err
			}
		}
		if err == nil {
			ev.ActionID = a.ID
			if ev.At.IsZero() {
				ev.At = a.CreatedAt
			}
			if _, err := insertEvent(ctx, tx, ev); err != nil {
				return err
			}
			if d := p.Decision; d != nil {
				dev := *d
				dev.ActionID = a.ID
				if _, err := insertEvent(ctx, tx, dev); err != nil {
					return err
				}
			}
			if grant != nil {
				if err := useGrant(ctx, tx, grant, grantTry.Now); err != nil {
					return err
				}
				if _, err := insertEvent(ctx, tx, approved); err != nil {
					return err
				}
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
	if errors.Is(err, errPlanStepRefused) {
		return queue.ActionSubmitResult{PlanStepRefused: true}, nil
	}
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", given.ID, err)
	}
	// A new row decodes (storableTimes checked its times; spec and
	// warnings are json.Marshal's output): an error here is a holder's.
	holder, err := row.action()
	if err != nil {
		return queue.ActionSubmitResult{}, fmt.Errorf("submit action %s: %w", given.ID, err)
	}
	holder.Ticket = ticket
	if underReviewed {
		return queue.ActionSubmitResult{Holder: holder, UnderReview: true}, nil
	}
	if created {
		p.Action.Attempt = holder.Attempt
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

// insertArgs are the arguments of ActionSubmit's insert for a.
func insertArgs(a *queue.Action, spec, warnings string) []any {
	// An exactly-once action is claimed by its submission; the deadline
	// follows from the snapshot's claim_timeout.
	var claimedAt, claimDeadline any
	if a.ClaimedAt != nil {
		claimedAt = fmtTime(*a.ClaimedAt)
		claimDeadline = fmtTime(*a.ClaimDeadline())
	}
	var grantID any
	if a.GrantID != "" {
		grantID = a.GrantID
	}
	return []any{a.ID, a.Tool, a.IntentKey, string(a.Class), string(a.State), string(a.Payload),
		nullJSON(a.ApprovedPayload), nullJSON(a.Result), nullString(a.Error), a.RequestedBy, a.Channel,
		nullString(a.DecidedBy), nullString(a.DecisionNote), fmtTime(a.CreatedAt), nullTime(a.DecidedAt),
		claimedAt, nullString(a.ClaimedBy), claimDeadline, nullTime(a.FinishedAt), nullTime(a.ExpiresAt),
		boolInt(a.ServerExecuted()), spec, warnings, queue.ApprovalsJSON(a.Approvals), grantID}
}

// heldActionQuery reads the action holding the intent key ?. Its condition
// spells out the predicate of actions_held_intent term for term (an
// at-least-once action holds nothing, whatever its state): SQLite uses a
// partial index only when each term of the index's WHERE appears in the
// query's (TestHeldActionQueryUsesHeldIntentIndex).
var heldActionQuery = `SELECT ` + actionColumns + ` FROM actions
	WHERE intent_key = ? AND state IN (` + heldStates + `) AND class <> 'at-least-once'`

// underReviewTicketQuery reads the conflict ticket open on the latest
// attempt of the intent key ? (the highest attempt number of a class other
// than at-least-once), through actions_intent_attempt and
// tickets_one_open.
var underReviewTicketQuery = `SELECT ` + ticketColumns + ` FROM tickets
	WHERE kind = 'conflict' AND state = 'open' AND action_id = (
		SELECT id FROM actions WHERE intent_key = ? AND class <> 'at-least-once' ORDER BY attempt DESC LIMIT 1)`

// underReview returns the latest attempt of key and its open conflict
// ticket when the attempt holds nothing (a holder answers the submission
// itself: the insert meets it), or nil.
func underReview(ctx context.Context, tx querier, key string) (*actionRow, *queue.Ticket, error) {
	tk, err := scanTicket(tx.QueryRowContext(ctx, underReviewTicketQuery, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var latest actionRow
	if err := latest.scan(tx.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ?`, tk.ActionID)); err != nil {
		return nil, nil, err
	}
	if slices.Contains(queue.HeldStates, queue.State(latest.state)) {
		return nil, nil, nil
	}
	return &latest, tk, nil
}
