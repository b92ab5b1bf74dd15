package templates

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// ActionView is the page of one action.
type ActionView struct {
	Now    time.Time
	Action *queue.Action
	// PreviewTitle and Preview come from the tool's preview templates,
	// rendered from the approved payload when an approver edited it
	// (PreviewEdited): the page shows what is executed.
	PreviewTitle  string
	Preview       []Field
	PreviewEdited bool
	Payload       string // pretty-printed
	// ApprovedPayload is set when it differs from Payload (an edit).
	ApprovedPayload string
	// Compact says which of Payload, ApprovedPayload and Result are shown
	// compact, being too long to indent (PrettyJSONBounded).
	PayloadCompact, ApprovedCompact, ResultCompact bool
	// ShowURLPaths shows URLs whose path is a credential whole (admins);
	// other staff see the path elided (classify.ShownURL).
	ShowURLPaths bool
	// Diff shows the edit field by field; no Fields when not edited.
	Diff      DiffView
	Result    string
	Events    []EventView
	Attempts  []*queue.Action // the other attempts of the intent
	CanDecide bool
	CSRF      string
	Form      DecisionForm
	// Error is shown above everything (a 409: who decided, and when).
	Error string
	// Notice confirms what this request did ("Approved.").
	Notice string
	// PrevID and NextID are the neighbouring pending actions in the queue.
	PrevID, NextID string
	// Quorum is who approved so far and who may still decide.
	Quorum QuorumView
	// Notifications are the action's notifications, oldest first.
	Notifications []queue.NotificationRecord
	// Revision is set on an attempt that follows a change request: the
	// note that asked for it and this payload against the earlier one.
	Revision *RevisionView
	// Decider is set when a policy rule or a grant decided the action at
	// its submission (or a human rule sent it to a person).
	Decider *DeciderView
	// Grant offers "Approve and allow similar" when the tool takes grants.
	Grant *GrantOffer
}

// DeciderView is what decided an action at its submission, from the
// events that recorded it.
type DeciderView struct {
	// Rule, Expression and Decision of a policy rule; Note a rejection's.
	Rule, Expression, Decision, Note string
	// GrantID and GrantedBy of a grant.
	GrantID, GrantedBy string
	// HeldFor are the warnings (queue.UnseenRisks) for which an approve
	// rule's match went to a person instead.
	HeldFor []string
}

// HasPreview says whether the tool's preview shows anything; without it
// the payload is what a person reads first.
func (v ActionView) HasPreview() bool { return v.PreviewTitle != "" || len(v.Preview) > 0 }

// heldForText names warnings in words: "invisible characters and a
// policy rule that failed".
func heldForText(ws []string) string {
	words := make([]string, len(ws))
	for i, w := range ws {
		words[i] = warningText(w)
	}
	switch len(words) {
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// helpSuffix is ": help", or nothing without help.
func helpSuffix(help string) string {
	if help == "" {
		return ""
	}
	return ": " + help
}

// ticketPageURL is the ticket's card on the tickets page.
func ticketPageURL(t *queue.Ticket) string {
	return "/tickets?state=" + string(t.State) + "#ticket-" + t.ID
}

// GrantOffer is the "Approve and allow similar" form.
type GrantOffer struct {
	// Durations are the choices of grant_for, up to the tool's grants.max.
	Durations []string
	// DefaultUses is the use limit offered, and the one an empty field
	// gets: queue.DefaultGrantUses, or MaxUses when smaller.
	DefaultUses int
	// MaxUses is the tool's grants.max_uses (0: no limit).
	MaxUses int
	// Fields are the payload's fields a grant may hold fixed.
	Fields []Field
	Agent  string // the action's agent
}

// GrantForm keeps what was chosen when a grant is refused.
type GrantForm struct {
	For, Uses, Agent string
	Fields           []string
	Error            string
}

// QuorumView is the approval rule of an action as it stands.
type QuorumView struct {
	Approvals []queue.Approval
	Required  int
	// Still is how many approvals are still needed (0 once decided).
	Still int
	// MayDecide are the people who may still decide (eligible, not yet
	// approved); Anyone means the tool names no approvers.
	MayDecide []string
	Anyone    bool
	// MayDecideGroups are the identity provider groups whose members may
	// decide too (as of their last sign-in).
	MayDecideGroups []string
}

// RevisionView is a revision asked for by a change request.
type RevisionView struct {
	Earlier *queue.Action // the attempt whose change request this answers
	Note    string
	Diff    DiffView
}

// Field is one labelled value.
type Field struct {
	Name  string
	Value string
}

// DecisionForm keeps what was typed when a decision is refused, so the
// form is re-shown as it was.
type DecisionForm struct {
	Note          string
	Payload       string
	PayloadEdited bool
	ApproveError  string
	RejectNote    string
	RejectError   string
	ChangesNote   string
	ChangesError  string
	Grant         GrantForm
}

// EventView is one entry of the timeline.
type EventView struct {
	Event queue.Event
	// Note and Changed are pulled out of the data for decisions.
	Note    string
	Changed []string
	Data    string // pretty-printed data, if any
}

func executorText(a *queue.Action, admin bool) string {
	if a.Spec.Upstream != "" {
		return "approvals, on upstream " + a.Spec.Upstream + " tool " + a.Spec.UpstreamTool
	}
	if a.Spec.Executor != nil && a.Spec.Executor.Webhook != "" {
		return "webhook " + classify.ShownURL(a.Spec.Executor.Webhook, admin)
	}
	return "agent"
}

// checkText is how an operator verifies the action's effect: the tool's
// check, or for a call made on an upstream MCP server, where to look.
func checkText(a *queue.Action) string {
	if a.Spec.Check != "" || a.Spec.Upstream == "" {
		return a.Spec.Check
	}
	return fmt.Sprintf("Check in the system behind upstream %s whether its tool %s ran with the arguments sent (intent %q); approvals called it once and got no answer, and never calls it again.",
		a.Spec.Upstream, a.Spec.UpstreamTool, a.IntentKey)
}

// upstreamArguments is what approvals sent (or sends) to the upstream tool.
func upstreamArguments(v ActionView) string {
	if v.ApprovedPayload != "" {
		return v.ApprovedPayload
	}
	return v.Payload
}

func actionURL(id string) string { return "/actions/" + id }

// grantsURL links a grant on the grants page.
func grantsURL(id string) string { return "/grants#grant-" + id }

// decisionSentence says who decided an action and when: "by user:a@b at
// 2026-01-02 15:04:05 UTC".
func decisionSentence(a *queue.Action) string {
	s := "by " + str(a.DecidedBy) + " at " + formatTimePtr(a.DecidedAt)
	if a.DecisionNote != nil && *a.DecisionNote != "" {
		s += ": " + *a.DecisionNote
	}
	return s
}

func maxUses(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}
