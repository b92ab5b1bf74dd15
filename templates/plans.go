package templates

import (
	"strconv"
	"strings"

	"github.com/approvals/approvals/queue"
)

// PlanView is a plan's page: its steps, their decisions and, once
// submitted, their actions' states; the decision forms while it waits.
type PlanView struct {
	Plan *queue.Plan
	// CanDecide: the viewer's role decides and they may decide every
	// human step (queue.Plan.MayDecide).
	CanDecide bool
	CSRF      string
	Error     string
	Notice    string
	Note      string
}

func planURL(id string) string { return "/plans/" + id }

func planDecideURL(id, decision string) string { return "/plans/" + id + "/" + decision }

// planStateClass reuses the action states' badge colours where they fit.
func planStateClass(s queue.PlanState) string { return "badge state-" + string(s) }

// stepProgress says where a step is: not submitted, or its action's state.
func stepProgress(st *queue.PlanStep) string {
	if st.ActionID == "" {
		return "not submitted"
	}
	return strings.ReplaceAll(string(st.ActionState), "_", " ")
}

// stepDecision words what the tool's rules make of a step.
func stepDecision(st *queue.PlanStep) string {
	switch st.Decision {
	case queue.StepApprove:
		return "approved by policy " + st.Rule
	case queue.StepReject:
		return "rejected by policy " + st.Rule
	case queue.StepHuman:
		if st.Rule != "" {
			return "a person decides (rule " + st.Rule + ")"
		}
		return "a person decides"
	}
	return "needs nobody"
}

// stepTicket words a step's ticket: "stale claim, open".
func stepTicket(t *queue.PlanStepTicket) string {
	kind := "stale claim"
	if t.Kind == queue.TicketConflict {
		kind = "conflicting outcome"
	}
	return kind + ", " + string(t.State)
}

// stepTicketURL is the ticket's card on the tickets page.
func stepTicketURL(t *queue.PlanStepTicket) string {
	return ticketPageURL(&queue.Ticket{ID: t.ID, State: t.State})
}

func ticketClass(t *queue.PlanStepTicket) string {
	if t.State == queue.TicketOpen {
		return "badge badge-warn"
	}
	return "badge"
}

func stepN(n int) string { return strconv.Itoa(n) }

func joinWords(ws []string) string { return strings.Join(ws, ", ") }
