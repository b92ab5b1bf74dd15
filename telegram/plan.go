package telegram

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// A plan's message lists every step (tool, class, what its rule decided, its preview) with
// the approvals the plan needs and a link to the plan page. Approve (callback data
// "approve:plan:ID") is offered only when the message shows every step whole; rejecting a
// plan, which needs a reason, is done on the plan page.

// planListRunes is the room for the steps in a message, which holds 4096 characters: the
// rest is the plan's heading, the outcome or what is not shown.
const planListRunes = 4096 - 800

// PlanHidden says what a Telegram message of pl leaves out (steps are pl's steps as
// actions, queue.Plan.StepActions); nil when it shows every step whole.
func PlanHidden(pl *queue.Plan, steps []*queue.Action) []string {
	var out []string
	for i, a := range steps {
		if h := preview.Hidden(a, room); len(h) > 0 {
			out = append(out, fmt.Sprintf("step %d: %s", pl.Steps[i].N, strings.Join(h, "; ")))
		}
	}
	if len(out) == 0 {
		if n := utf8.RuneCountInString(planText(pl, steps, true)); n > planListRunes {
			out = append(out, fmt.Sprintf("the steps' previews (%d characters, more than a Telegram message holds)", n))
		}
	}
	return out
}

// planText is the list of pl's steps, with each preview's fields when full.
func planText(pl *queue.Plan, steps []*queue.Action, full bool) string {
	var b strings.Builder
	for i, st := range pl.Steps {
		decision := st.Decision
		if st.Rule != "" {
			decision += " (rule " + st.Rule + ")"
		}
		fmt.Fprintf(&b, "\n\n<b>Step %d</b> · <code>%s</code> · %s · %s", st.N, esc(st.Tool), esc(string(st.Class)), esc(decision))
		if i >= len(steps) {
			continue
		}
		fmt.Fprintf(&b, "\n%s", esc(preview.Headline(steps[i])))
		if full {
			for j, f := range preview.Of(steps[i]).Fields {
				if j == room.Fields {
					break
				}
				fmt.Fprintf(&b, "\n<b>%s</b>\n<blockquote>%s</blockquote>", esc(f.Name), esc(cut(f.Value, room.FieldRunes)))
			}
		}
	}
	return b.String()
}

// renderPlan builds a plan's message: with Approve while the plan is pending and shown
// whole, else saying who decided what.
func (c *Client) renderPlan(n queue.Notification) Message {
	pl, steps := n.Plan, n.PlanSteps
	label := "Plan approval request"
	switch n.Type {
	case classify.EventPlanPending:
		label = "Plan approval needed"
	case classify.EventPlanReminder:
		label = "Reminder: plan approval needed"
	case classify.EventPlanEscalated:
		label = "Escalated: plan approval needed"
	}
	hidden := PlanHidden(pl, steps)
	var b strings.Builder
	fmt.Fprintf(&b, "<b>%s</b> · %d steps\n<b>%s</b>\nNeeds %d approval(s), %d so far · asked by %s", esc(label), len(pl.Steps),
		esc(cut(pl.Title, 300)), pl.ApprovalsRequired, len(pl.Approvals), esc(pl.Agent))
	if pl.State == queue.PlanPending {
		b.WriteString(" · expires " + date(pl.ExpiresAt))
	}
	list := planText(pl, steps, len(hidden) == 0)
	if r := []rune(list); len(r) > planListRunes {
		// Cut at a step's start, so that no tag is left open.
		cutAt := strings.LastIndex(string(r[:planListRunes]), "\n\n<b>Step ")
		if cutAt < 0 {
			cutAt = 0
		}
		list = list[:cutAt] + "\n\n… more steps on the plan page"
	}
	b.WriteString(list)
	link := c.publicURL + "/plans/" + pl.ID
	if pl.State != queue.PlanPending {
		by := ""
		if pl.DecidedBy != nil {
			by = " by " + esc(strings.TrimPrefix(*pl.DecidedBy, "user:"))
		}
		fmt.Fprintf(&b, "\n\n<b>Plan %s</b>%s", esc(strings.ReplaceAll(string(pl.State), "_", " ")), by)
		return Message{Text: b.String()}
	}
	if len(hidden) > 0 {
		fmt.Fprintf(&b, "\n\n⚠️ <b>Not shown here:</b> %s. Open the plan to decide.", esc(cut(strings.Join(hidden, "; "), 600)))
		return Message{Text: b.String(), Keyboard: [][]Button{{{Text: "Open the plan to decide", URL: link}}}}
	}
	return Message{Text: b.String(), Keyboard: [][]Button{{
		{Text: "Approve plan", CallbackData: CallbackApprove + ":" + queue.PlanSubject(pl.ID)},
		{Text: "Open (reject there)", URL: link},
	}}}
}

// pressPlan approves a plan from its message's button.
func (h *Webhook) pressPlan(ctx context.Context, q CallbackQuery, by, id string) (string, bool) {
	text, refused := h.flow.ApprovePlan(ctx, h.cfg.Service.Plans(),
		queue.PlanDecideRequest{ID: id, To: queue.PlanApproved, By: by, Note: "via Telegram", Channel: "telegram"},
		func(pl *queue.Plan) []string { return PlanHidden(pl, pl.StepActions(h.cfg.Service.Registry())) },
		h.cfg.Client.publicURL+"/plans/"+id, "telegram_user", q.From.ID, "plan", id)
	if text == "" {
		text = "Plan approved."
	}
	return text, refused
}
