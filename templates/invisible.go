package templates

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/a-h/templ"

	"github.com/approvals/approvals/classify"
)

// Marked shows s as text with each invisible character (a
// Default_Ignorable_Code_Point or format character, classify.IsInvisible) replaced by a
// visible mark naming its code point, such as [U+202E]: an approver must
// see that the text holds something the screen would not show, and where.
// Everything is escaped: s is shown as text, never as markup.
func Marked(s string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, markInvisible(s))
		return err
	})
}

// markInvisible is the HTML of Marked.
func markInvisible(s string) string {
	if !strings.ContainsFunc(s, classify.IsInvisible) {
		return templ.EscapeString(s)
	}
	var b strings.Builder
	start := 0
	for i, r := range s {
		if !classify.IsInvisible(r) {
			continue
		}
		b.WriteString(templ.EscapeString(s[start:i]))
		fmt.Fprintf(&b, `<mark class="invisible" data-testid="invisible" title="invisible character">[U+%04X]</mark>`, r)
		start = i + len(string(r))
	}
	b.WriteString(templ.EscapeString(s[start:]))
	return b.String()
}

// Visible is s with each invisible character written as its code point,
// such as [U+202E], for places that hold only text (a page's <title>).
func Visible(s string) string {
	if !strings.ContainsFunc(s, classify.IsInvisible) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if classify.IsInvisible(r) {
			fmt.Fprintf(&b, "[U+%04X]", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// maxJSONDepth is the deepest indentation MarkedJSON keeps for wrapped
// lines; deeper lines wrap at that depth (app.css has a class per level).
const maxJSONDepth = 16

// MarkedJSON shows indented JSON text (PrettyJSON) as Marked does, one
// block per line with its depth as a class, so that a line too long for a
// narrow screen wraps under its own indentation instead of at the left
// edge, where a deeply nested document would lose its shape. The text
// (spaces included) is unchanged: copied, it is the same JSON.
func MarkedJSON(s string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b strings.Builder
		for line := range strings.SplitSeq(s, "\n") {
			depth := (len(line) - len(strings.TrimLeft(line, " "))) / len(indentText)
			fmt.Fprintf(&b, `<span class="jl d%d">`, min(depth, maxJSONDepth))
			b.WriteString(markInvisible(line))
			b.WriteString("</span>")
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
}
