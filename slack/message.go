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
	// ButtonApproveSimilar approves and grants the actions like it (this
	// agent, any payload of the tool) for SimilarFor, capped by the tool's
	// grants.max: the companion of Approve.
	ButtonApproveSimilar = "approve_similar"
	// ButtonReview links to the action page in place of Approve; Slack still sends its
	// click, which changes nothing.
	ButtonReview = "review"
)

// decisionBlockID names the actions block that holds the buttons.
const decisionBlockID = "decision"

// Message is what is posted or updated: the notification's fallback line and its blocks.
type Message struct {
	Text   string
	Blocks []slackapi.Block
}

// options are the message as slack-go sends it. The fallback text is escaped like the
// blocks: Slack reads mrkdwn there too, and a payload's "<!channel>" would ping everyone.
func (m Message) options() []slackapi.MsgOption {
	return []slackapi.MsgOption{slackapi.MsgOptionText(m.Text, true), slackapi.MsgOptionBlocks(m.Blocks...)}
}

// Render builds the message for n from the action as it is now: with buttons while it is
// pending, else saying who decided what (the buttons are gone). Approve is offered only when
// the message shows every field of the payload whole and the action has no warnings;
// otherwise the message says what it does not show and links to the action page instead, so
// nobody approves with one click what they could not read.
func (c *Client) Render(n queue.Notification) (Message, error) {
	if n.Plan != nil {
		return c.renderPlan(n), nil
	}
	if n.Action == nil {
		return Message{}, fmt.Errorf("notification %s: no action", n.ID)
	}
	return c.render(n), nil
}

func (c *Client) render(n queue.Notification) Message {
	a := n.Action
	p := preview.Of(a)
	headline := preview.Headline(a)
	event := preview.Label(n)
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(mrkdwn(fmt.Sprintf("*%s* · %s\n*%s*", escape(event), toolName(a.Tool), escapeText(headline))), nil, nil),
	}
	if fields := previewFields(p); len(fields) > 0 {
		blocks = append(blocks, slackapi.NewSectionBlock(nil, fields, nil))
	}
	pending := a.State == queue.StatePending && n.Type != classify.EventTicketOpened
	hidden := hiddenParts(a)
	if pending && len(hidden) > 0 {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(":warning: *Not shown here:* "+escapeText(strings.Join(hidden, "; "))+
			". Review the action in approvals before approving it."), nil, nil))
	}
	facts := []string{"Intent key " + escapeText(a.IntentKey), "asked by " + escapeText(a.RequestedBy)}
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
	if pending {
		first := slackapi.NewButtonBlockElement(ButtonApprove, a.ID, plain("Approve")).WithStyle(slackapi.StylePrimary)
		if len(hidden) > 0 {
			first = slackapi.NewButtonBlockElement(ButtonReview, a.ID, plain("Review in approvals")).WithURL(link)
		}
		buttons := []slackapi.BlockElement{first}
		if d, ok := c.similarFor(a); ok && len(hidden) == 0 {
			buttons = append(buttons, slackapi.NewButtonBlockElement(ButtonApproveSimilar, a.ID, plain("Approve + similar for "+classify.FormatDuration(d))))
		}
		buttons = append(buttons,
			slackapi.NewButtonBlockElement(ButtonReject, a.ID, plain("Reject")).WithStyle(slackapi.StyleDanger),
			slackapi.NewButtonBlockElement(ButtonRequestChanges, a.ID, plain("Request changes")),
		)
		blocks = append(blocks, slackapi.NewActionBlock(decisionBlockID, buttons...))
		return Message{Text: text, Blocks: blocks}
	}
	outcome := Outcome(a)
	blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(outcome), nil, nil))
	return Message{Text: fmt.Sprintf("%s: %s", a.Tool, headline) + " — " + plainOutcome(a), Blocks: blocks}
}

// SimilarFor is how long "Approve + similar" grants, unless the tool's
// grants.max is shorter.
const SimilarFor = 8 * time.Hour

// similarFor is the length of the grant "Approve + similar" creates for a,
// and false when the tool (in the tools file in force) takes no grants or
// the action needs more than one approval.
func (c *Client) similarFor(a *queue.Action) (time.Duration, bool) {
	if c.tools == nil || a.ApprovalsRequired > 1 {
		return 0, false
	}
	tool, _ := c.tools().Lookup(a.Tool)
	l, err := tool.GrantLimits()
	if err != nil {
		return 0, false
	}
	return min(SimilarFor, l.Max), true
}

// Slack's limits on one section's fields, as the message uses them.
const (
	maxFields     = 10
	maxFieldRunes = 1800
)

// room is what a Slack message shows of a preview: Slack allows ten fields of a section,
// of at most 2000 characters each.
// A field's value is measured as it is sent, escaped, with the ">" quoting each line after
// the first (plain text of one line counts its characters); the 200 characters left hold
// the field's name and the first ">".
var room = preview.Room{Fields: maxFields, FieldRunes: maxFieldRunes, Length: func(value string) int {
	return utf8.RuneCountInString(quote(escapeText(value))) - 1
}}

// OneClick reports whether a Slack message may offer to approve a with one click: it shows
// every field of the payload whole and a has no warnings. The interactions endpoint asks
// again when Approve is pressed, so a message posted under other rules decides nothing more.
func OneClick(a *queue.Action) bool { return len(hiddenParts(a)) == 0 }

// hiddenParts says what a Slack message does not show of a whole (preview.Hidden).
func hiddenParts(a *queue.Action) []string { return preview.Hidden(a, room) }

// Outcome says in Slack mrkdwn who decided what and when, and how it ended.
func Outcome(a *queue.Action) string {
	by, when, note := "", "", ""
	if a.DecidedBy != nil {
		by = " by " + escapeText(person(*a.DecidedBy))
	}
	if a.DecidedAt != nil {
		when = " " + slackDate(*a.DecidedAt)
	}
	if a.DecisionNote != nil && *a.DecisionNote != "" {
		note = "\n" + quote(escapeText(cutQuoted(*a.DecisionNote, 1500)))
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
			// The error is the agent's or the receiver's text: kept on this line.
			errText = ": " + strings.ReplaceAll(escapeText(cut(*a.Error, 500)), "\n", " ")
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
// 2000 characters each. Each value is quoted line by line, so no line of it can pass for one
// of the message's own (a fake "Approved by").
func previewFields(p preview.Preview) []*slackapi.TextBlockObject {
	var out []*slackapi.TextBlockObject
	for _, f := range p.Fields {
		if len(out) == maxFields {
			break
		}
		out = append(out, mrkdwn("*"+escapeText(f.Name)+"*\n"+quote(escapeText(cutField(f.Value)))))
	}
	return out
}

// toolName shows a tool's name as code when it holds only the characters of the tools
// file's names; an unregistered tool's name is the agent's text, escaped.
func toolName(name string) string {
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.-:", c)) {
			return escapeText(name)
		}
	}
	return "`" + name + "`"
}

// quote puts ">" before every line of s: a Slack block quote.
func quote(s string) string { return ">" + strings.ReplaceAll(s, "\n", "\n>") }

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

// escape makes text inert as links and mentions in mrkdwn: Slack reads <…> as links and
// mentions (<!channel>), so &, < and > are written as entities, as Slack's formatting guide
// asks.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// zwsp is the zero-width space escapeText puts around formatting characters.
const zwsp = "\u200b"

// textEscaper writes agent text inertly in mrkdwn. Slack has no escape for its formatting
// characters (*bold*, _italic_, ~strike~, `code`), and they format only at a word boundary:
// a zero-width space on each side keeps one from opening or closing formatting whether Slack
// reads that space as a boundary or not. Every kind of line break becomes a newline, which
// the callers quote or cut, so agent text cannot start a line of its own.
var textEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;",
	"*", zwsp+"*"+zwsp, "_", zwsp+"_"+zwsp, "~", zwsp+"~"+zwsp, "`", zwsp+"`"+zwsp,
	"\r\n", "\n", "\r", "\n", "\u2028", "\n", "\u2029", "\n", "\u0085", "\n", "\v", "\n", "\f", "\n",
)

// escapeText escapes text an agent (or anyone but approvals) wrote for a mrkdwn field.
func escapeText(s string) string { return textEscaper.Replace(s) }

// cutField cuts a preview field's value to what a message shows of it (room), marking the
// cut with "…".
func cutField(s string) string { return cutQuoted(s, maxFieldRunes) }

// cutQuoted cuts s so that, escaped and quoted, it is at most limit characters (room's
// measure), marking the cut with "…".
func cutQuoted(s string, limit int) string {
	if shown := (preview.Room{FieldRunes: limit, Length: room.Length}).Cut(s); shown != s {
		return shown + "…"
	}
	return s
}

func cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "…"
}
