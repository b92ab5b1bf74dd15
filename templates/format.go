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

// PrettyJSON indents a JSON document for reading; invalid JSON is shown as
// it is.
func PrettyJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// CompactJSON renders a JSON document on one line, cut at limit runes.
func CompactJSON(raw []byte, limit int) string {
	var b bytes.Buffer
	s := string(raw)
	if err := json.Compact(&b, raw); err == nil {
		s = b.String()
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
	return strings.ReplaceAll(w, "_", " ")
}

func warningHelp(w string) string {
	switch w {
	case "tool_not_registered":
		return "This tool is not in the tools file: it is treated as at-most-once and its intent key was supplied by the agent."
	case "intent_key_looks_random":
		return "The intent key looks like a request id or timestamp: another agent with the same objective would not derive it, so a retry may not be recognised."
	case queue.WarningInvisibleCharacters:
		return "The payload holds bidirectional-control or zero-width characters, which can make text read differently from what is sent; each is marked below as [U+…]."
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
