package templates

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/approvals/approvals/queue"
)

// DiffView shows how one payload became another, field by field: an
// approver's edit (submitted → approved), or a revision (the earlier
// attempt → this one). It takes the two payloads, so both uses share it.
type DiffView struct {
	Caption     string
	BeforeLabel string // "Submitted"
	AfterLabel  string // "Approved"
	Fields      []FieldDiff
}

// FieldDiff is one changed field, named by its RFC 6901 pointer.
type FieldDiff struct {
	Pointer string
	// Old and New are the values as text: a string as it is, anything
	// else as compact JSON. Absent when the field is not in that payload.
	Old, New             string
	OldAbsent, NewAbsent bool
	// Words is the word-level diff when both values are strings;
	// WordsSkipped says it was not made, the page's budget being spent.
	Words        []WordSpan
	WordsSkipped bool
}

// WordSpan is a run of words kept, removed or added.
type WordSpan struct {
	Op   string // "same", "del" or "ins"
	Text string
}

// NewDiffView compares two payloads; Fields is empty when they are equal.
// Each document is decoded once, whatever the number of fields, and the
// word diffs share the page's budget.
func NewDiffView(before, after json.RawMessage, caption, beforeLabel, afterLabel string, budget *DiffBudget) DiffView {
	v := DiffView{Caption: caption, BeforeLabel: beforeLabel, AfterLabel: afterLabel}
	pointers := queue.EditedPointers(before, after)
	if len(pointers) == 0 {
		return v
	}
	b, _ := queue.DecodeValue(before)
	a, _ := queue.DecodeValue(after)
	for _, p := range pointers {
		f := FieldDiff{Pointer: p}
		oldV, inBefore := queue.ResolvePointer(b, p)
		newV, inAfter := queue.ResolvePointer(a, p)
		f.OldAbsent, f.NewAbsent = !inBefore, !inAfter
		oldStr, oldIsStr := oldV.(string)
		newStr, newIsStr := newV.(string)
		f.Old, f.New = valueText(oldV, inBefore), valueText(newV, inAfter)
		if inBefore && inAfter && oldIsStr && newIsStr {
			f.Words, f.WordsSkipped = wordDiffWithin(oldStr, newStr, budget)
		}
		v.Fields = append(v.Fields, f)
	}
	return v
}

// valueText is a value as the diff shows it: a string as it is, anything
// else as compact JSON.
func valueText(v any, present bool) string {
	if !present {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// maxWordTokens bounds the word diff; longer texts are shown old and new
// side by side only.
const maxWordTokens = 20000

// MaxDiffWork is the word-diff work one page may do, in pairs of tokens
// compared (the words of two texts, past what they share at their start
// and end, multiplied): about 40 ms on a small server for texts that
// differ throughout. A count, not a clock, so the same page always shows
// the same marks.
const MaxDiffWork = 8_000_000

// DiffBudget is what is left of a page's word-diff work (MaxDiffWork).
type DiffBudget struct{ left int }

// NewDiffBudget is the budget of one page.
func NewDiffBudget() *DiffBudget { return &DiffBudget{left: MaxDiffWork} }

// WordDiff compares two texts word by word (runs of letters and digits,
// runs of white space, and single other characters), so an edit reads as
// whole words removed and added rather than scattered letters. It maps
// each distinct token to one rune and lets diffmatchpatch diff the runes,
// as its line mode does for lines. It has a page's budget of its own.
func WordDiff(before, after string) []WordSpan {
	spans, _ := wordDiffWithin(before, after, NewDiffBudget())
	return spans
}

// wordDiffWithin is WordDiff charged to budget: nil and skipped true when
// the texts would cost more than is left, so the field is shown old and
// new without word marks.
func wordDiffWithin(before, after string, budget *DiffBudget) (spans []WordSpan, skipped bool) {
	tokens := map[string]rune{}
	var vocab []string
	encode := func(s string) ([]rune, bool) {
		var out []rune
		for _, tok := range splitWords(s) {
			r, ok := tokens[tok]
			if !ok {
				r = tokenRune(len(vocab))
				tokens[tok] = r
				vocab = append(vocab, tok)
			}
			out = append(out, r)
		}
		return out, len(out) <= maxWordTokens
	}
	r1, ok1 := encode(before)
	r2, ok2 := encode(after)
	if !ok1 || !ok2 {
		return nil, true
	}
	if cost := diffCost(r1, r2); budget == nil || cost > budget.left {
		return nil, true
	} else {
		budget.left -= cost
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // exact; the budget bounds the work
	for _, d := range dmp.DiffMainRunes(r1, r2, false) {
		op := "same"
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = "del"
		case diffmatchpatch.DiffInsert:
			op = "ins"
		}
		var text []byte
		for _, r := range d.Text {
			text = append(text, vocab[runeToken(r)]...)
		}
		spans = append(spans, WordSpan{Op: op, Text: string(text)})
	}
	return groupChanges(spans), false
}

// diffCost bounds the work of diffing a and b: diffmatchpatch drops what
// they share at their start and end, and diffs the rest in time at most
// the product of their lengths.
func diffCost(a, b []rune) int {
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	return (len(a) + 1) * (len(b) + 1)
}

// groupChanges joins changes separated only by white space into one
// removal and one addition ("-a b- +c d+" rather than "-a- +c- -b- +d-"),
// which reads as the phrase that was replaced.
func groupChanges(spans []WordSpan) []WordSpan {
	var out []WordSpan
	for i := 0; i < len(spans); {
		if spans[i].Op == "same" {
			out = append(out, spans[i])
			i++
			continue
		}
		var del, ins strings.Builder
		j := i
		for j < len(spans) {
			s := spans[j]
			if s.Op == "same" {
				// Only white space between two changes joins them.
				if strings.TrimSpace(s.Text) != "" || j+1 == len(spans) {
					break
				}
				del.WriteString(s.Text)
				ins.WriteString(s.Text)
			} else if s.Op == "del" {
				del.WriteString(s.Text)
			} else {
				ins.WriteString(s.Text)
			}
			j++
		}
		if del.Len() > 0 {
			out = append(out, WordSpan{Op: "del", Text: del.String()})
		}
		if ins.Len() > 0 {
			out = append(out, WordSpan{Op: "ins", Text: ins.String()})
		}
		i = j
	}
	return out
}

// tokenRune and runeToken number tokens with valid runes from U+0100 on,
// skipping the surrogates, which do not survive the diff's strings.
func tokenRune(i int) rune {
	r := rune(i + 0x100)
	if r >= 0xD800 {
		r += 0x800
	}
	return r
}

func runeToken(r rune) int {
	if r >= 0xE000 {
		r -= 0x800
	}
	return int(r - 0x100)
}

func splitWords(s string) []string {
	var out []string
	kind := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 0
	}
	start, prev := 0, -1
	for i, r := range s {
		k := kind(r)
		if r == utf8.RuneError {
			k = 0
		}
		if i > start && (k != prev || k == 0) {
			out = append(out, s[start:i])
			start = i
		}
		prev = k
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// pointerLabel names a field for people: the pointer without its leading
// slash ("to/name"), or "(whole payload)" for the root.
func pointerLabel(p string) string {
	if p == "" {
		return "(whole payload)"
	}
	return p[1:]
}
