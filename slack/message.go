package slack

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// The button action_ids; each button's value is the action id.
const (
	ButtonApprove        = "approve"
	ButtonReject         = "reject"
	ButtonRequestChanges = "request_changes"
)

// decisionBlockID names the actions block that holds the buttons.
const decisionBlockID = "decision"

// message is what is posted or updated: the notification's fallback line and its blocks.
type message struct {
	Text   string
	Blocks []slackapi.Block
}

// options are the message as slack-go sends it. The fallback text is escaped like the
// blocks: Slack reads mrkdwn there too, and a payload's "<!channel>" would ping everyone.
func (m message) options() []slackapi.MsgOption {
	return []slackapi.MsgOption{slackapi.MsgOptionText(m.Text, true), slackapi.MsgOptionBlocks(m.Blocks...)}
}

// render builds the message for n from the action as it is now: with buttons while it is
// pending, else saying who decided what (the buttons are gone).
func (c *Client) render(n queue.Notification) message {
	a := n.Action
	headline := preview.Headline(a)
	event := eventLabel(n)
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(mrkdwn(fmt.Sprintf("*%s* · `%s`\n*%s*", escape(event), escape(a.Tool), escape(headline))), nil, nil),
	}
	if fields := previewFields(a); len(fields) > 0 {
		blocks = append(blocks, slackapi.NewSectionBlock(nil, fields, nil))
	}
	facts := []string{"Intent key `" + escape(a.IntentKey) + "`", "asked by " + escape(a.RequestedBy)}
	if a.State == queue.StatePending && a.ExpiresAt != nil {
		facts = append(facts, "expires "+slackDate(*a.ExpiresAt))
	}
	blocks = append(blocks, slackapi.NewContextBlock("", mrkdwn(strings.Join(facts, " · "))))
	if t := n.Ticket; t != nil {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(fmt.Sprintf("Ticket %s (%s) opened %s", escape(t.ID), escape(string(t.Kind)), slackDate(t.OpenedAt))), nil, nil))
	}
	link := c.publicURL + "/actions/" + a.ID
	blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn("<"+link+"|Open the action in approvals>"), nil, nil))
	text := fmt.Sprintf("%s: %s: %s", event, a.Tool, headline)
	if a.State == queue.StatePending && n.Type != classify.EventTicketOpened {
		blocks = append(blocks, slackapi.NewActionBlock(decisionBlockID,
			slackapi.NewButtonBlockElement(ButtonApprove, a.ID, plain("Approve")).WithStyle(slackapi.StylePrimary),
			slackapi.NewButtonBlockElement(ButtonReject, a.ID, plain("Reject")).WithStyle(slackapi.StyleDanger),
			slackapi.NewButtonBlockElement(ButtonRequestChanges, a.ID, plain("Request changes")),
		))
		return message{Text: text, Blocks: blocks}
	}
	outcome := Outcome(a)
	blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(outcome), nil, nil))
	return message{Text: fmt.Sprintf("%s: %s", a.Tool, headline) + " — " + plainOutcome(a), Blocks: blocks}
}

func eventLabel(n queue.Notification) string {
	switch {
	case n.Type == classify.EventTicketOpened:
		return "Ticket opened"
	case n.Action.State != queue.StatePending:
		return "Approval request"
	case n.Type == classify.EventActionReminder:
		return "Reminder: approval needed"
	case n.Type == classify.EventActionEscalated:
		return "Escalated: approval needed"
	}
	return "Approval needed"
}

// Outcome says in Slack mrkdwn who decided what and when, and how it ended.
func Outcome(a *queue.Action) string {
	by, when, note := "", "", ""
	if a.DecidedBy != nil {
		by = " by " + escape(person(*a.DecidedBy))
	}
	if a.DecidedAt != nil {
		when = " " + slackDate(*a.DecidedAt)
	}
	if a.DecisionNote != nil && *a.DecisionNote != "" {
		note = "\n>" + strings.ReplaceAll(escape(cut(*a.DecisionNote, 1500)), "\n", "\n>")
	}
	switch a.State {
	case queue.StateApproved:
		return ":white_check_mark: *Approved*" + by + when + note
	case queue.StateInProgress:
		return ":white_check_mark: *Approved*" + by + when + ", being carried out" + note
	case queue.StateDone:
		return ":white_check_mark: *Approved*" + by + when + ", *done*" + note
	case queue.StateFailed:
		errText := ""
		if a.Error != nil {
			errText = ": " + escape(cut(*a.Error, 500))
		}
		return ":white_check_mark: *Approved*" + by + when + ", :x: *failed*" + errText + note
	case queue.StateRejected:
		return ":no_entry: *Rejected*" + by + when + note
	case queue.StateChangesRequested:
		return ":pencil2: *Changes requested*" + by + when + note
	case queue.StateExpired:
		return ":hourglass: *Expired*" + when + " without a decision"
	case queue.StateCancelled:
		return ":heavy_multiplication_x: *Cancelled*" + by + when + note
	case queue.StatePending:
		return "*Waiting for approval*"
	}
	return "*" + escape(string(a.State)) + "*" + by + when
}

// plainOutcome is the fallback line's form of Outcome.
func plainOutcome(a *queue.Action) string {
	s := strings.ReplaceAll(string(a.State), "_", " ")
	if a.DecidedBy != nil && a.State != queue.StateExpired {
		s += " (decided by " + person(*a.DecidedBy) + ")"
	}
	return s
}

// previewFields are the preview's fields as section fields: Slack allows ten of at most
// 2000 characters each.
func previewFields(a *queue.Action) []*slackapi.TextBlockObject {
	var out []*slackapi.TextBlockObject
	for _, f := range preview.Of(a).Fields {
		if len(out) == 10 {
			break
		}
		out = append(out, mrkdwn("*"+escape(f.Name)+"*\n"+escape(cut(f.Value, 1800))))
	}
	return out
}

func person(actor string) string { return strings.TrimPrefix(actor, "user:") }

// slackDate shows t in each reader's own time zone, with a UTC fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func mrkdwn(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false)
}

func plain(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.PlainTextType, s, false, false)
}

// escape makes payload text inert in mrkdwn: Slack reads <…> as links and mentions
// (<!channel>), so &, < and > are written as entities, as Slack's formatting guide asks.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "…"
}
