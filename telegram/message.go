package telegram

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// Callback data of the buttons: the word, a colon, the action id (at most 64 bytes).
const (
	CallbackApprove = "approve"
	CallbackReject  = "reject"
)

// Message is what is sent or edited: HTML text and, while the action is pending, the inline
// keyboard.
type Message struct {
	Text     string
	Keyboard [][]Button
}

// room is what a Telegram message shows of a preview: a message holds 4096 characters.
var room = preview.Room{Fields: 10, FieldRunes: 250}

// OneClick reports whether a Telegram message may offer Approve: it shows every field of the
// payload whole and the action has no warnings (docs/channels.md, "Telegram channel"). The webhook asks again
// when Approve is pressed.
func OneClick(a *queue.Action) bool { return len(preview.Hidden(a, room)) == 0 }

// Render builds the message for n from the action as it is now: with the keyboard while it
// is pending (Approve only when the message shows everything, else the reason it does not),
// else saying who decided what, without buttons. Agent text is escaped, and each preview
// value is quoted, so that no line of it passes for one of the message's own.
func (c *Client) Render(n queue.Notification) (Message, error) {
	if n.Plan != nil {
		return c.renderPlan(n), nil
	}
	a := n.Action
	if a == nil {
		return Message{}, fmt.Errorf("notification %s: no action", n.ID)
	}
	p := preview.Of(a)
	var b strings.Builder
	fmt.Fprintf(&b, "<b>%s</b> · <code>%s</code>\n<b>%s</b>\n", esc(preview.Label(n)), esc(a.Tool), esc(preview.Headline(a)))
	for i, f := range p.Fields {
		if i == room.Fields {
			break
		}
		fmt.Fprintf(&b, "\n<b>%s</b>\n<blockquote>%s</blockquote>", esc(f.Name), esc(cut(f.Value, room.FieldRunes)))
	}
	facts := []string{"Intent key <code>" + esc(a.IntentKey) + "</code>", "asked by " + esc(a.RequestedBy)}
	if a.State == queue.StatePending && a.ExpiresAt != nil {
		facts = append(facts, "expires "+date(*a.ExpiresAt))
	}
	b.WriteString("\n" + strings.Join(facts, " · "))
	if t := n.Ticket; t != nil {
		fmt.Fprintf(&b, "\nTicket %s (%s) opened %s", esc(t.ID), esc(string(t.Kind)), date(t.OpenedAt))
	}
	link := c.publicURL + "/actions/" + a.ID
	pending := a.State == queue.StatePending && n.Type != classify.EventTicketOpened
	if !pending {
		b.WriteString("\n\n" + outcome(a))
		return Message{Text: b.String()}, nil
	}
	reject := Button{Text: "Reject", CallbackData: CallbackReject + ":" + a.ID}
	if hidden := preview.Hidden(a, room); len(hidden) > 0 {
		fmt.Fprintf(&b, "\n\n⚠️ <b>Not shown here:</b> %s. Review the action in approvals before approving it.", esc(strings.Join(hidden, "; ")))
		return Message{Text: b.String(), Keyboard: [][]Button{{{Text: "Review in approvals", URL: link}, reject}}}, nil
	}
	return Message{Text: b.String(), Keyboard: [][]Button{{{Text: "Approve", CallbackData: CallbackApprove + ":" + a.ID}, reject, {Text: "Open", URL: link}}}}, nil
}

// outcome says who decided what and when, and how it ended.
func outcome(a *queue.Action) string {
	by, when, note := "", "", ""
	if a.DecidedBy != nil && a.State != queue.StateExpired {
		by = " by " + esc(strings.TrimPrefix(*a.DecidedBy, "user:"))
	}
	if a.DecidedAt != nil {
		when = " " + date(*a.DecidedAt)
	}
	if a.DecisionNote != nil && *a.DecisionNote != "" {
		note = "\n<blockquote>" + esc(cut(*a.DecisionNote, 1000)) + "</blockquote>"
	}
	switch a.State {
	case queue.StateApproved, queue.StateInProgress:
		return "✅ <b>Approved</b>" + by + when + note
	case queue.StateDone:
		return "✅ <b>Approved</b>" + by + when + ", <b>done</b>" + note
	case queue.StateFailed:
		return "✅ <b>Approved</b>" + by + when + ", ❌ <b>failed</b>" + note
	case queue.StateRejected:
		return "⛔ <b>Rejected</b>" + by + when + note
	case queue.StateChangesRequested:
		return "✏️ <b>Changes requested</b>" + by + when + note
	case queue.StateExpired:
		return "⌛ <b>Expired</b>" + when + " without a decision"
	case queue.StateCancelled:
		return "✖️ <b>Cancelled</b>" + by + when + note
	}
	return "<b>" + esc(string(a.State)) + "</b>" + by + when
}

// esc makes text inert in Telegram's HTML: only <, > and & (and quotes) have meaning there.
func esc(s string) string { return html.EscapeString(s) }

func date(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

func cut(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}
