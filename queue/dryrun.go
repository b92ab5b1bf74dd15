package queue

import (
	"context"
	"strings"

	"github.com/approvals/approvals/classify"
)

// Outcomes of a dry run (docs/api.md, "Dry run"): what a submission would do.
const (
	DryRunApprove     = "approve"      // a rule or a grant would approve it at once
	DryRunReject      = "reject"       // a rule would reject it
	DryRunHuman       = "human"        // a person would decide it
	DryRunClaim       = "claim"        // an exactly-once claim would be taken
	DryRunRecord      = "record"       // an at-least-once action would be recorded
	DryRunReplay      = "replay"       // the intent is held with this tool and payload
	DryRunInProgress  = "in_progress"  // held by an exactly-once claim mid-flight
	DryRunConflict    = "conflict"     // held with another tool or payload
	DryRunUnderReview = "under_review" // a conflict ticket is open on the intent's latest attempt
)

// DryRunResult says what a submission would do. Action is the held action
// for replay, in_progress and conflict, else the action the submission
// would create, with no id: nothing is stored.
type DryRunResult struct {
	Outcome string  `json:"outcome"`
	Action  *Action `json:"action"`
	// Rule names the policy rule behind approve, reject or human; Grant the
	// grant behind approve.
	Rule  string `json:"rule,omitempty"`
	Grant string `json:"grant,omitempty"`
}

// DryRun runs a submission's checks and says what it would do, writing
// nothing: no action, no event, no replay record. Its errors are those of
// a submission.
func (s *Service) DryRun(ctx context.Context, req SubmitRequest) (DryRunResult, error) {
	tool, registered := s.Registry().Lookup(req.Tool)
	sub, err := s.prepare(ctx, req, tool, registered)
	if err != nil {
		return DryRunResult{}, err
	}
	a := sub.a
	held := sub.held
	if req.Plan != "" {
		// A step of a plan: the plan's refusals, its replay, or what it
		// makes of the step, as the submission would meet them.
		_, used, err := s.applyPlan(ctx, req, sub)
		if err != nil {
			return DryRunResult{}, err
		}
		if used != nil {
			held = used
		}
	}
	if held == nil {
		if held, err = s.heldAction(ctx, tool, a.IntentKey); err != nil {
			return DryRunResult{}, err
		}
	}
	if held != nil {
		switch {
		case held.Tool != req.Tool || !JSONEqual(held.Payload, req.Payload):
			return DryRunResult{Outcome: DryRunConflict, Action: held}, nil
		case held.State == StateInProgress && held.Class == classify.ExactlyOnce:
			return DryRunResult{Outcome: DryRunInProgress, Action: held}, nil
		}
		return DryRunResult{Outcome: DryRunReplay, Action: held}, nil
	}
	if a.Class != classify.AtLeastOnce {
		latest, err := s.latestAttempt(ctx, a.IntentKey)
		if err != nil {
			return DryRunResult{}, err
		}
		if latest != nil && latest.Ticket != nil && latest.Ticket.Kind == TicketConflict && latest.Ticket.State == TicketOpen {
			return DryRunResult{Outcome: DryRunUnderReview, Action: latest}, nil
		}
	}
	a.ID = ""
	if a.Warnings == nil {
		a.Warnings = []string{} // as a store answers it
	}
	rule := a.DecidedByRule()
	if a.DecidedBy != nil && strings.HasPrefix(*a.DecidedBy, PlanActorPrefix) {
		rule = "" // the plan decides, not the rule its step was judged by
	}
	switch a.State {
	case StateApproved:
		return DryRunResult{Outcome: DryRunApprove, Action: a, Rule: rule}, nil
	case StateRejected:
		return DryRunResult{Outcome: DryRunReject, Action: a, Rule: rule}, nil
	case StateInProgress:
		return DryRunResult{Outcome: DryRunClaim, Action: a}, nil
	case StateRecorded:
		return DryRunResult{Outcome: DryRunRecord, Action: a}, nil
	}
	if sub.grant != nil {
		g, err := s.store.GrantFind(ctx, GrantFindParams{Tool: a.Tool, RequestedBy: a.RequestedBy, Payload: a.Payload, Now: a.CreatedAt,
			Approval: a.Spec.Approval})
		switch {
		case err == nil:
			GrantApproved(a, g, sub.grant)
			return DryRunResult{Outcome: DryRunApprove, Action: a, Grant: g.ID}, nil
		case ErrorCode(err) != CodeNotFound:
			return DryRunResult{}, err
		}
	}
	return DryRunResult{Outcome: DryRunHuman, Action: a, Rule: rule}, nil
}

// latestAttempt is the action of key's highest attempt (at-least-once
// actions take no attempts), with its current ticket, or nil: what a
// submission's store statement reads to hold an intent under review.
func (s *Service) latestAttempt(ctx context.Context, key string) (*Action, error) {
	list, err := s.store.ActionList(ctx, ActionListParams{IntentKey: key, Limit: 50})
	if err != nil {
		return nil, err
	}
	var latest *Action
	for _, a := range list {
		if a.Class != classify.AtLeastOnce && (latest == nil || a.Attempt > latest.Attempt) {
			latest = a
		}
	}
	return latest, nil
}
