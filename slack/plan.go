package slack

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// A plan's message lists every step (its tool, class, what its rule decided and its
// preview) with the plan's quorum and a link to the plan page. Its buttons carry the value
// "plan:ID", so the interactions endpoint decides the plan (queue.Plans.Decide) with the
// dashboard's rule of who may. Approve is offered only when the message shows every step
// whole; otherwise the message says what it leaves out and asks to open the plan to decide.

// Limits of a plan's message, within Slack's 50 blocks and its message size: one section a
// step, and a budget of characters for all the steps' preview fields together.
const (
	maxPlanStepBlocks = 40
	planFieldBudget   = 12000
)

// PlanHidden says what a Slack message of pl leaves out of its steps (steps are pl's steps
// as actions, queue.Plan.StepActions); nil when it shows every step whole, the only case in
// which it offers Approve.
func PlanHidden(pl *queue.Plan, steps []*queue.Action) []string {
	var out []string
	if len(steps) > maxPlanStepBlocks {
		return []string{fmt.Sprintf("%d steps, more than a Slack message lists", len(steps))}
	}
	budget := 0
	for _, a := range steps {
		for _, f := range preview.Of(a).Fields {
			budget += min(room.Length(f.Value), maxFieldRunes)
		}
	}
	if budget > planFieldBudget {
		return []string{"the steps' previews (" + strconv.Itoa(budget) + " characters, more than a Slack message holds)"}
	}
	for i, a := range steps {
		if h := hiddenParts(a); len(h) > 0 {
			out = append(out, fmt.Sprintf("step %d: %s", pl.Steps[i].N, strings.Join(h, "; ")))
		}
	}
	return out
}

// renderPlan builds a plan's message: with buttons while the plan is pending, else saying
// who decided what.
func (c *Client) renderPlan(n queue.Notification) Message {
	pl, steps := n.Plan, n.PlanSteps
	link := c.publicURL + "/plans/" + pl.ID
	label := "Plan approval request"
	switch n.Type {
	case classify.EventPlanPending:
		label = "Plan approval needed"
	case classify.EventPlanReminder:
		label = "Reminder: plan approval needed"
	case classify.EventPlanEscalated:
		label = "Escalated: plan approval needed"
	}
	pending := pl.State == queue.PlanPending
	hidden := PlanHidden(pl, steps)
	whole := len(hidden) == 0
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(mrkdwn(fmt.Sprintf("*%s* · %d steps\n*%s*", escape(label), len(pl.Steps), escapeText(cut(pl.Title, 500)))), nil, nil),
	}
	facts := []string{fmt.Sprintf("needs %d approval(s), %d so far", pl.ApprovalsRequired, len(pl.Approvals)), "asked by " + escapeText(pl.Agent)}
	if pending {
		facts = append(facts, "expires "+slackDate(pl.ExpiresAt))
	}
	blocks = append(blocks, slackapi.NewContextBlock("", mrkdwn(strings.Join(facts, " · "))))
	for i, st := range pl.Steps {
		if i == maxPlanStepBlocks {
			blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(fmt.Sprintf("… and %d more steps", len(pl.Steps)-i)), nil, nil))
			break
		}
		decision := escape(st.Decision)
		if st.Rule != "" {
			decision += " (rule " + escapeText(st.Rule) + ")"
		}
		text := fmt.Sprintf("*Step %d* · %s · %s · %s\nIntent key %s", st.N, toolName(st.Tool), escape(string(st.Class)), decision, escapeText(cut(st.IntentKey, 200)))
		var fields []*slackapi.TextBlockObject
		if i < len(steps) {
			text += "\n" + quote(escapeText(preview.Headline(steps[i])))
			if whole {
				fields = previewFields(preview.Of(steps[i]))
			}
		}
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(text), fields, nil))
	}
	if pending && !whole {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(":warning: *Not shown here:* "+escapeText(cutQuoted(strings.Join(hidden, "; "), 1500))+
			". Open the plan to decide."), nil, nil))
	}
	blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn("<"+link+"|Open the plan in approvals>"), nil, nil))
	text := fmt.Sprintf("%s: %d steps: %s", label, len(pl.Steps), cut(pl.Title, 200))
	if pending {
		value := queue.PlanSubject(pl.ID)
		first := slackapi.NewButtonBlockElement(ButtonApprove, value, plain("Approve plan")).WithStyle(slackapi.StylePrimary)
		if !whole {
			first = slackapi.NewButtonBlockElement(ButtonReview, value, plain("Open the plan to decide")).WithURL(link)
		}
		blocks = append(blocks, slackapi.NewActionBlock(decisionBlockID, first,
			slackapi.NewButtonBlockElement(ButtonReject, value, plain("Reject")).WithStyle(slackapi.StyleDanger),
			slackapi.NewButtonBlockElement(ButtonRequestChanges, value, plain("Request changes")),
		))
		return Message{Text: text, Blocks: blocks}
	}
	blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(PlanOutcome(pl)), nil, nil))
	return Message{Text: fmt.Sprintf("Plan: %s — %s", cut(pl.Title, 200), strings.ReplaceAll(string(pl.State), "_", " ")), Blocks: blocks}
}

// PlanOutcome says in Slack mrkdwn who decided the plan what, and when.
func PlanOutcome(pl *queue.Plan) string {
	by, when, note := "", "", ""
	if pl.DecidedBy != nil {
		by = " by " + escapeText(person(*pl.DecidedBy))
	}
	if pl.DecidedAt != nil {
		when = " " + slackDate(*pl.DecidedAt)
	}
	if pl.DecisionNote != nil && *pl.DecisionNote != "" {
		note = "\n" + quote(escapeText(cutQuoted(*pl.DecisionNote, 1500)))
	}
	switch pl.State {
	case queue.PlanApproved:
		return ":white_check_mark: *Plan approved*" + by + when + note
	case queue.PlanDone:
		return ":white_check_mark: *Plan approved*" + by + when + ", *done*" + note
	case queue.PlanRejected:
		return ":no_entry: *Plan rejected*" + by + when + note
	case queue.PlanChangesRequested:
		return ":pencil2: *Changes requested*" + by + when + note
	case queue.PlanCancelled:
		return ":heavy_multiplication_x: *Plan cancelled*" + by + when
	case queue.PlanExpired:
		return ":hourglass: *Plan expired*"
	}
	return "*" + escape(string(pl.State)) + "*" + by + when
}

// planButton handles a button of a plan's message and returns the ephemeral reply, if any.
func (h *Interactions) planButton(ctx context.Context, in Interaction, by, id string) string {
	if !queue.ValidID(id) {
		return fmt.Sprintf("Nothing was changed: plan %q does not exist.", id)
	}
	plans := h.cfg.Service.Plans()
	pl, err := plans.Get(ctx, id)
	if err != nil {
		return h.planRefusal(ctx, in, err)
	}
	switch in.Button {
	case ButtonApprove:
		text, _ := h.flow.ApprovePlan(ctx, plans, queue.PlanDecideRequest{ID: id, To: queue.PlanApproved, By: by, Note: "via Slack", Channel: "slack"},
			func(pl *queue.Plan) []string { return PlanHidden(pl, pl.StepActions(h.cfg.Service.Registry())) },
			h.cfg.Client.publicURL+"/plans/"+id, "slack_user", in.UserID, "plan", id)
		return text
	case ButtonReject, ButtonRequestChanges:
		if pl.State != queue.PlanPending {
			return fmt.Sprintf("Nothing was changed: the plan is %s already.", pl.State)
		}
		if refusal := h.flow.MayNotDecidePlan(ctx, pl, by); refusal != "" {
			return refusal
		}
		if err := h.cfg.Client.OpenNoteModal(ctx, in.TriggerID, in.Button, queue.PlanSubject(pl.ID)); err != nil {
			h.cfg.Logger.Warn("slack interaction: open the note modal", "plan", pl.ID, "err", err)
			return "Slack did not open the form for the note; press the button again or decide on the dashboard."
		}
		return ""
	}
	return "Nothing was changed: a plan is approved as a whole, without grants."
}

// planSubmission decides a plan with the note of a submitted modal.
func (h *Interactions) planSubmission(ctx context.Context, in Interaction, by, id string) string {
	if !queue.ValidID(id) {
		return fmt.Sprintf("Plan %q does not exist.", id)
	}
	r := queue.PlanDecideRequest{ID: id, To: queue.PlanChangesRequested, By: by, Note: in.Note, Channel: "slack"}
	if in.CallbackID == ButtonReject {
		r.To = queue.PlanRejected
	}
	if _, err := h.cfg.Service.Plans().Decide(ctx, r); err != nil {
		return h.planRefusal(ctx, in, err)
	}
	return ""
}

func (h *Interactions) planRefusal(ctx context.Context, in Interaction, err error) string {
	return h.flow.Refusal(ctx, err, "slack_user", in.UserID, "plan", in.ActionID)
}
