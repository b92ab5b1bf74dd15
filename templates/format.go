package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/queue"
)

// FormatTime renders a time for people: UTC, to the second.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return FormatTime(*t)
}

func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Span renders a duration coarsely: "45s", "12m", "3h 05m", "2d 4h".
func Span(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

func age(now, t time.Time) string { return Span(now.Sub(t)) }

func expiresIn(now time.Time, t *time.Time) string {
	if t == nil {
		return "—"
	}
	if !t.After(now) {
		return "expired"
	}
	return "in " + Span(t.Sub(now))
}

// MaxPrettyJSON is the most text PrettyJSON writes indented: a document
// nested thousands deep indents to a hundred megabytes from twenty
// kilobytes, so past this it is shown compact, which is never longer than
// the document.
const MaxPrettyJSON = 256 << 10

// PrettyJSON indents a JSON document for reading, or shows it compact when
// indented it would be more than MaxPrettyJSON bytes; invalid JSON is shown
// as it is.
func PrettyJSON(raw []byte) string {
	s, _ := PrettyJSONBounded(raw)
	return s
}

// PrettyJSONBounded is PrettyJSON, also saying whether the document is
// shown compact because indented it would be too long (the page says so).
// Characters sent as \u escapes are shown as characters
// (queue.ReadableJSON), which never makes the text longer.
func PrettyJSONBounded(raw []byte) (text string, compact bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", false
	}
	if !json.Valid(raw) {
		return string(raw), false
	}
	var b bytes.Buffer
	if indentedLength(raw, indentText, MaxPrettyJSON) > MaxPrettyJSON {
		_ = json.Compact(&b, raw)
		return queue.ReadableJSON(b.String()), true
	}
	_ = json.Indent(&b, raw, "", indentText)
	return queue.ReadableJSON(b.String()), false
}

const indentText = "  "

// indentedLength is how long json.Indent's text of the valid JSON raw
// would be, counted without writing it; it stops counting past limit.
func indentedLength(raw []byte, indent string, limit int) int {
	n, depth := 0, 0
	inString, escaped, opened := false, false, false
	newline := func(d int) int { return 1 + d*len(indent) }
	for _, c := range raw {
		if inString {
			n++
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if opened && c != '}' && c != ']' {
			n += newline(depth) // the first element of a non-empty container
		}
		switch c {
		case '"':
			inString = true
			n++
		case '{', '[':
			depth++
			n++
		case '}', ']':
			depth--
			if !opened {
				n += newline(depth)
			}
			n++
		case ',':
			n += 1 + newline(depth)
		case ':':
			n += 2
		default:
			n++
		}
		opened = c == '{' || c == '['
		if n > limit {
			return n
		}
	}
	return n
}

// CompactJSON renders a JSON document on one line, cut at limit runes.
func CompactJSON(raw []byte, limit int) string {
	var b bytes.Buffer
	s := string(raw)
	if err := json.Compact(&b, raw); err == nil {
		s = queue.ReadableJSON(b.String())
	}
	return Truncate(s, limit)
}

// Truncate cuts s at limit runes, marking the cut.
func Truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit]) + "…"
}

func stateClass(s queue.State) string { return "badge state-" + string(s) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Humanize turns an identifier such as "intent_key_reused" into
// "Intent key reused".
func Humanize(s string) string {
	s = strings.ReplaceAll(s, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func warningText(w string) string {
	switch w {
	case "tool_not_registered":
		return "tool not registered"
	case "intent_key_looks_random":
		return "intent key looks random"
	case queue.WarningInvisibleCharacters:
		return "invisible characters"
	}
	if rule, ok := strings.CutPrefix(w, queue.WarningPolicyError+":"); ok {
		return "policy rule " + rule + " failed"
	}
	return strings.ReplaceAll(w, "_", " ")
}

func warningHelp(w string) string {
	switch w {
	case "tool_not_registered":
		return "This tool is not in the tools file: it is treated as at-most-once and its intent key was supplied by the agent."
	case "intent_key_looks_random":
		return "The intent key looks like a request id or timestamp: another agent with the same objective would not derive it, so a retry may not be recognised."
	case queue.WarningInvisibleCharacters:
		return "The payload holds invisible characters (bidirectional controls, zero-width or format characters, tag characters, variation selectors), which can make text read differently from what is sent; each is marked below as [U+…]."
	}
	if rule, ok := strings.CutPrefix(w, queue.WarningPolicyError+":"); ok {
		return "The expression of policy rule " + rule + " failed for this payload (the timeline's submitted event says why). Evaluation stopped at that rule: no later rule, grant or claim decides this action; a person decides."
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
