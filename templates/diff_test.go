package templates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/templates"
)

func TestWordDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, before, after string
		want                []templates.WordSpan
	}{
		{"equal", "Hi Sam", "Hi Sam", []templates.WordSpan{{"same", "Hi Sam"}}},
		{"one word", "Your order ships today", "Your order ships tomorrow",
			[]templates.WordSpan{{"same", "Your order ships "}, {"del", "today"}, {"ins", "tomorrow"}}},
		{"whole words, not letters", "refund 10 EUR", "refund 100 EUR",
			[]templates.WordSpan{{"same", "refund "}, {"del", "10"}, {"ins", "100"}, {"same", " EUR"}}},
		{"inserted words", "Hi Sam,\nthanks.", "Hi Sam,\nmany thanks.",
			[]templates.WordSpan{{"same", "Hi Sam,\n"}, {"ins", "many "}, {"same", "thanks."}}},
		{"from empty", "", "new text", []templates.WordSpan{{"ins", "new text"}}},
		{"non-ASCII", "Grüße aus Köln", "Grüße aus München",
			[]templates.WordSpan{{"same", "Grüße aus "}, {"del", "Köln"}, {"ins", "München"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := templates.WordDiff(tc.before, tc.after)
			if len(got) != len(tc.want) {
				t.Fatalf("WordDiff = %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("WordDiff = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestWordDiffReassembles: the kept and removed spans spell the old text,
// the kept and added ones the new, for texts with many distinct words (as
// many as one page's budget lets it compare).
func TestWordDiffReassembles(t *testing.T) {
	t.Parallel()
	var b, a strings.Builder
	for i := range 1400 {
		w := strings.Repeat(string(rune('a'+i%26)), 1+i%7) + string(rune('0'+i%10))
		b.WriteString(w + " ")
		if i%5 != 0 {
			a.WriteString(w + " ")
		} else {
			a.WriteString("x" + w + "\n")
		}
	}
	var old, nw strings.Builder
	for _, s := range templates.WordDiff(b.String(), a.String()) {
		if s.Op != "ins" {
			old.WriteString(s.Text)
		}
		if s.Op != "del" {
			nw.WriteString(s.Text)
		}
	}
	if old.String() != b.String() || nw.String() != a.String() {
		t.Fatal("the spans do not spell the two texts")
	}
}

func render(t *testing.T, v templates.DiffView) (*html.Node, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := templates.PayloadDiff(v).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc, buf.String()
}

func byTestID(root *html.Node, id string) []*html.Node {
	var out []*html.Node
	for n := range root.Descendants() {
		for _, a := range n.Attr {
			if a.Key == "data-testid" && a.Val == id {
				out = append(out, n)
			}
		}
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// TestPayloadDiff renders the component and reads it back by data-testid:
// one row per changed field with old and new values, the word diff of a
// text as del and ins with hidden labels, and hostile text as text.
func TestPayloadDiff(t *testing.T) {
	t.Parallel()
	before := json.RawMessage(`{"to":"sam@example.com","subject":"Your order <script>alert(1)</script> ships","amount":10,"cc":"x@example.com","keep":true}`)
	after := json.RawMessage(`{"to":"sam@example.com","subject":"Your order <script>alert(2)</script> ships today","amount":12.5,"keep":true,"tags":["a"]}`)
	v := templates.NewDiffView(before, after, "Edited by the approver", "Submitted", "Approved", templates.NewDiffBudget())
	doc, raw := render(t, v)

	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "script" {
			t.Fatalf("payload text became a script element:\n%s", raw)
		}
	}
	rows := byTestID(doc, "diff-field")
	var pointers []string
	for _, r := range rows {
		pointers = append(pointers, attr(r, "data-pointer"))
	}
	if strings.Join(pointers, " ") != "/amount /cc /subject /tags" {
		t.Fatalf("rows for %q, want /amount /cc /subject /tags", pointers)
	}
	cell := func(row *html.Node, id string) string { return strings.TrimSpace(text(byTestID(row, id)[0])) }
	for i, w := range []struct{ old, new string }{
		{"10", "12.5"},
		{"x@example.com", "(removed)"},
		{"Your order <script>alert(1)</script> ships", "Your order <script>alert(2)</script> ships today"},
		{"(not present)", `["a"]`},
	} {
		if got := cell(rows[i], "diff-old"); got != w.old {
			t.Errorf("%s old = %q, want %q", pointers[i], got, w.old)
		}
		if got := cell(rows[i], "diff-new"); got != w.new {
			t.Errorf("%s new = %q, want %q", pointers[i], got, w.new)
		}
	}
	words := byTestID(doc, "diff-words")
	if len(words) != 1 {
		t.Fatalf("%d word diffs, want 1 (only /subject is text on both sides)", len(words))
	}
	var dels, inss []string
	for n := range words[0].Descendants() {
		if n.Type == html.ElementNode && (n.Data == "del" || n.Data == "ins") {
			label := strings.TrimSpace(text(n.FirstChild))
			if n.Data == "del" && label != "removed:" || n.Data == "ins" && label != "added:" {
				t.Errorf("<%s> is labelled %q", n.Data, label)
			}
			body := strings.TrimPrefix(text(n), text(n.FirstChild))
			if n.Data == "del" {
				dels = append(dels, body)
			} else {
				inss = append(inss, body)
			}
		}
	}
	if strings.Join(dels, "|") != "1" || strings.Join(inss, "|") != "2| today" {
		t.Errorf("removed %q, added %q; want [1] and [2, today]", dels, inss)
	}
	// The whole diff, labels aside, reads as the old and new text merged.
	if !strings.Contains(raw, "&lt;script&gt;alert(") {
		t.Errorf("the script tag is not escaped:\n%s", raw)
	}
}

// A page's word diffs share one budget, counted in work (pairs of tokens
// compared), not time: two long texts that differ throughout exhaust it,
// and past it a field is shown old and new without word marks, saying so.
// The same page always shows the same marks.
func TestWordDiffBudget(t *testing.T) {
	t.Parallel()
	text := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d ", prefix, i)
		}
		return b.String()
	}
	// 1,500 words and spaces each way: 3,000 tokens, 9 million pairs, more
	// than one page's budget (8 million); a short edit beside it still fits.
	before := `{"body":` + strconv.Quote(text("w", 1500)) + `,"subject":"Hello there"}`
	after := `{"body":` + strconv.Quote(text("x", 1500)) + `,"subject":"Hello world"}`
	start := time.Now()
	v := templates.NewDiffView(json.RawMessage(before), json.RawMessage(after), "c", "b", "a", templates.NewDiffBudget())
	if len(v.Fields) != 2 {
		t.Fatalf("%d fields, want 2", len(v.Fields))
	}
	body, subject := v.Fields[0], v.Fields[1]
	if !body.WordsSkipped || body.Words != nil || body.Old == "" || body.New == "" {
		t.Fatalf("body: skipped %v, %d spans; want it shown old and new without word marks", body.WordsSkipped, len(body.Words))
	}
	if subject.WordsSkipped || len(subject.Words) == 0 {
		t.Fatalf("subject: skipped %v; want its word diff", subject.WordsSkipped)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the page's diff took %s", d)
	}
	// A shared budget: the second diff of a page gets what the first left.
	budget := templates.NewDiffBudget()
	half := `{"body":` + strconv.Quote(text("w", 1100)) + `}`
	other := `{"body":` + strconv.Quote(text("y", 1100)) + `}`
	first := templates.NewDiffView(json.RawMessage(half), json.RawMessage(other), "c", "b", "a", budget)
	second := templates.NewDiffView(json.RawMessage(half), json.RawMessage(other), "c", "b", "a", budget)
	if first.Fields[0].WordsSkipped || !second.Fields[0].WordsSkipped {
		t.Fatalf("skipped first %v, second %v; want the second to find the budget spent", first.Fields[0].WordsSkipped, second.Fields[0].WordsSkipped)
	}
}
