// Package chatdecide is the one decision flow of the chat channels (Slack,
// Telegram): a person presses a button or answers a question in a chat,
// and approvals finds who decides, asks whether they may before anything
// is offered, decides through the same exactly-once path as the dashboard
// (queue.Service.Decide), and words what the person is told. Each channel
// keeps only what is its own: how its users are linked, what its messages
// show, and how it answers.
package chatdecide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// Deciding is what the flow needs of the domain.
type Deciding interface {
	Decide(ctx context.Context, r queue.DecideRequest) (queue.DriveResult, error)
	Staff() queue.Staff
}

// Flow is one channel's use of the decision flow.
type Flow struct {
	Service Deciding
	// Storage is pinged when a refusal's cause is unexpected (queue.ErrorOf).
	Storage queue.Pinger
	// Name is the channel as people know it: "Slack", "Telegram".
	Name   string
	Logger *slog.Logger
}

// lookupFailed is what a person is told when their account could not be read.
const lookupFailed = "Nothing was changed: approvals could not look up your account; try again or decide on the dashboard."

// Who resolves a chat user to the staff member who decides ("user:EMAIL"),
// or returns "" and what the person is told. account names the chat user
// in that refusal ("U024BE7LH", "id 42"); lookup finds the linked staff
// user (accounts.ErrNotFound when none is); attrs go to the log. Roles
// are checked here, the tool's approvers inside the decision.
func (f Flow) Who(ctx context.Context, account string, lookup func(context.Context) (*accounts.User, error), attrs ...any) (string, string) {
	u, err := lookup(ctx)
	switch {
	case errors.Is(err, accounts.ErrNotFound):
		return "", fmt.Sprintf("Nothing was changed: your %s account (%s) is not linked to an approvals user. Ask an admin to set your %s id on the users page.", f.Name, account, f.Name)
	case err != nil:
		f.Logger.Warn(strings.ToLower(f.Name)+": look up user", append(attrs, "err", err)...)
		return "", lookupFailed
	case !u.Role.CanDecide():
		return "", fmt.Sprintf("Nothing was changed: %s has the role %s, and only approvers and admins decide.", u.Email, u.Role)
	}
	return "user:" + u.Email, ""
}

// MayNotDecide says why by may not decide a, or "" when they may: the
// rule the decision itself applies (Action.MayDecide over Service.Staff().Decider,
// which counts identity-provider groups), asked before anything is offered.
func (f Flow) MayNotDecide(ctx context.Context, a *queue.Action, by string) string {
	d, err := f.Service.Staff().Decider(ctx, by)
	email := strings.TrimPrefix(by, "user:")
	switch {
	case err != nil:
		f.Logger.Warn(strings.ToLower(f.Name)+": look up the decider", "action", a.ID, "err", err)
		return lookupFailed
	case d.NoAccess:
		return fmt.Sprintf("Nothing was changed: at %s's last sign-in the identity provider's groups gave no role in approvals.", email)
	case !a.MayDecide(d):
		return fmt.Sprintf("Nothing was changed: %s is not among the approvers of tool %s.", email, a.Tool)
	}
	return ""
}

// Offer says why the Approve button of a's message decides nothing for by,
// or "" when it may approve: a pending action by may not decide, or one
// the message does not show whole (hidden names what it leaves out;
// reviewURL is the action's page). A message posted before the rules of
// one-click approval (or under other settings) may still carry Approve: it
// decides only what a message would show whole now.
func (f Flow) Offer(ctx context.Context, a *queue.Action, by string, hidden []string, reviewURL string) string {
	if a.State != queue.StatePending {
		return "" // the decision answers for a decided action
	}
	if refusal := f.MayNotDecide(ctx, a, by); refusal != "" {
		return refusal
	}
	if len(hidden) > 0 {
		return fmt.Sprintf("Nothing was changed: the message does not show all of this action (%s). Review it in approvals: %s",
			strings.Join(hidden, "; "), reviewURL)
	}
	return ""
}

// Approve decides r (an approval) and returns what the person is told and
// whether it is a refusal; "" when the approval completed and the
// action's messages say who approved it. attrs go to the log of an
// unexpected error.
func (f Flow) Approve(ctx context.Context, r queue.DecideRequest, attrs ...any) (string, bool) {
	res, err := f.Service.Decide(ctx, r)
	if err != nil {
		return f.Refusal(ctx, err, attrs...), true
	}
	switch {
	case res.Replayed:
		return "You had approved this action already; nothing changed.", false
	case res.Action.State == queue.StatePending:
		return fmt.Sprintf("Your approval is counted: %d of %d.", len(res.Action.Approvals), res.Action.Spec.Approval.RequiredApprovals()), false
	}
	return "", false
}

// Refusal words a failed decision for the person; attrs go to the log of
// an unexpected error.
func (f Flow) Refusal(ctx context.Context, err error, attrs ...any) string {
	qe := queue.ErrorOf(ctx, err, f.Storage, f.Logger, attrs...)
	switch qe.Code {
	case queue.CodeInternal, queue.CodeUnavailable:
		// The decision may have committed before the failure: say so.
		return "The outcome is not known: " + qe.Detail + " Check the action page before deciding again."
	}
	return "Nothing was changed: " + qe.Detail
}

// MayNotDecidePlan says why by may not decide pl, or "" when they may:
// the rule Plans.Decide applies (queue.Plan.MayDecide: every human step's
// approvers), asked before anything is offered.
func (f Flow) MayNotDecidePlan(ctx context.Context, pl *queue.Plan, by string) string {
	d, err := f.Service.Staff().Decider(ctx, by)
	email := strings.TrimPrefix(by, "user:")
	switch {
	case err != nil:
		f.Logger.Warn(strings.ToLower(f.Name)+": look up the decider", "plan", pl.ID, "err", err)
		return lookupFailed
	case d.NoAccess:
		return fmt.Sprintf("Nothing was changed: at %s's last sign-in the identity provider's groups gave no role in approvals.", email)
	case !pl.MayDecide(d):
		return fmt.Sprintf("Nothing was changed: %s is not among the approvers of every step of plan %s that a person decides.", email, pl.ID)
	}
	return ""
}

// ApprovePlan approves plan r.ID from a chat's one-click button: by must
// be allowed to decide it, and the message must show every step whole
// (hidden names what it leaves out; reviewURL is the plan page). It
// returns what the person is told and whether it is a refusal; "" when the
// plan is approved and its messages say so.
func (f Flow) ApprovePlan(ctx context.Context, plans queue.Plans, r queue.PlanDecideRequest, hidden func(*queue.Plan) []string, reviewURL string, attrs ...any) (string, bool) {
	pl, err := plans.Get(ctx, r.ID)
	if err != nil {
		return f.Refusal(ctx, err, attrs...), true
	}
	if pl.State == queue.PlanPending {
		if refusal := f.MayNotDecidePlan(ctx, pl, r.By); refusal != "" {
			return refusal, true
		}
		if h := hidden(pl); len(h) > 0 {
			return fmt.Sprintf("Nothing was changed: the message does not show all of this plan (%s). Open the plan to decide: %s",
				strings.Join(h, "; "), reviewURL), true
		}
	}
	res, err := plans.Decide(ctx, r)
	switch {
	case err != nil:
		return f.Refusal(ctx, err, attrs...), true
	case res.Outcome == queue.DecideReplayed:
		return "You had approved this plan already; nothing changed.", false
	case res.Plan.State == queue.PlanPending:
		return fmt.Sprintf("Your approval is counted: %d of %d.", len(res.Plan.Approvals), res.Plan.ApprovalsRequired), false
	}
	return "", false
}
