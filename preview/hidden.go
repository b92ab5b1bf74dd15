package preview

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Room is how much of a preview a chat message shows: at most Fields fields, each cut at
// FieldRunes characters. Slack's limits are not Telegram's, so each says its own.
type Room struct {
	Fields, FieldRunes int
	// Length measures a field's value as the message writes it, against FieldRunes; nil
	// counts its characters. Slack's escaping lengthens text ("&" is "&amp;"), and Slack's
	// limits count what is sent.
	Length func(string) int
}

// length measures value as room's messages write it.
func (room Room) length(value string) int {
	if room.Length != nil {
		return room.Length(value)
	}
	return utf8.RuneCountInString(value)
}

// Cut returns the longest start of value that room's messages show whole: all of it when
// it fits, else as many characters as keep it within FieldRunes.
func (room Room) Cut(value string) string {
	if room.length(value) <= room.FieldRunes {
		return value
	}
	r := []rune(value)
	lo, hi := 0, len(r) // the longest fitting prefix has lo runes, and hi is too many
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if room.length(string(r[:mid])) <= room.FieldRunes {
			lo = mid
		} else {
			hi = mid
		}
	}
	return string(r[:lo])
}

// Hidden says, in words for a chat message, what a message with room shows not of the
// action whole ("2 more fields (customer_id, topic)", "invisible characters"); nil when it
// shows everything and the action has no warnings. A message offers Approve with one click
// only then (docs/channels.md, the Slack and Telegram channels): nobody approves with one click
// what they could not read.
func Hidden(a *queue.Action, room Room) []string {
	p := Of(a)
	var out []string
	if len(a.Spec.Preview) == 0 {
		out = append(out, "the payload (this tool has no preview)")
	} else if payload, err := queue.DecodeObject(a.Payload); err != nil {
		out = append(out, "the payload")
	} else if hides := a.Spec.PreviewHides(payload); len(hides) > 0 {
		out = append(out, countOf(len(hides), "more field", "more fields")+" ("+listSome(hides, 5)+")")
	}
	if extra := len(p.Fields) - room.Fields; extra > 0 {
		out = append(out, countOf(extra, "more preview field", "more preview fields"))
	}
	var cut []string
	for i, f := range p.Fields {
		if i < room.Fields && room.length(f.Value) > room.FieldRunes {
			cut = append(cut, f.Name)
		}
	}
	if len(cut) > 0 {
		out = append(out, "the end of "+listSome(cut, 5)+" (cut at "+strconv.Itoa(room.FieldRunes)+" characters)")
	}
	if title := strings.TrimSpace(p.Title); title != "" && Headline(a) != title {
		out = append(out, "the end of the title")
	}
	for _, w := range a.Warnings {
		out = append(out, strings.ReplaceAll(w, "_", " ")) // invisible_characters: "invisible characters"
	}
	return out
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// listSome names the first n of names, and how many more there are. A name is cut at
// maxNameRunes: a payload's keys are an agent's text, of any length, and a chat message
// refused for its length would tell nobody anything.
func listSome(names []string, n int) string {
	more := ""
	if len(names) > n {
		names, more = names[:n], fmt.Sprintf(" and %d more", len(names)-n)
	}
	shown := make([]string, len(names))
	for i, name := range names {
		if r := []rune(name); len(r) > maxNameRunes {
			name = string(r[:maxNameRunes]) + "…"
		}
		shown[i] = name
	}
	return strings.Join(shown, ", ") + more
}

// maxNameRunes is the most of a field's name Hidden says.
const maxNameRunes = 60

// Label is the first words of a chat message about n: what it asks for while the action
// waits, else "Approval request" (the message then says how it was decided).
func Label(n queue.Notification) string {
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
