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
	// Words is the word-level diff when both values are strings.
	Words []WordSpan
}

// WordSpan is a run of words kept, removed or added.
type WordSpan struct {
	Op   string // "same", "del" or "ins"
	Text string
}

// NewDiffView compares two payloads; Fields is empty when they are equal.
func NewDiffView(before, after json.RawMessage, caption, beforeLabel, afterLabel string) DiffView {
	v := DiffView{Caption: caption, BeforeLabel: beforeLabel, AfterLabel: afterLabel}
	for _, p := range queue.EditedPointers(before, after) {
		f := FieldDiff{Pointer: p}
		oldRaw, inBefore := queue.PointerValue(before, p)
		newRaw, inAfter := queue.PointerValue(after, p)
		f.OldAbsent, f.NewAbsent = !inBefore, !inAfter
		var oldStr, newStr string
		oldIsStr := inBefore && json.Unmarshal(oldRaw, &oldStr) == nil
		newIsStr := inAfter && json.Unmarshal(newRaw, &newStr) == nil
		f.Old, f.New = valueText(oldRaw, oldStr, oldIsStr), valueText(newRaw, newStr, newIsStr)
		if oldIsStr && newIsStr {
			f.Words = WordDiff(oldStr, newStr)
		}
		v.Fields = append(v.Fields, f)
	}
	return v
}

func valueText(raw json.RawMessage, s string, isString bool) string {
	if isString {
		return s
	}
	return string(raw)
}

// maxWordTokens bounds the word diff; longer texts are shown old and new
// side by side only.
const maxWordTokens = 20000

// WordDiff compares two texts word by word (runs of letters and digits,
// runs of white space, and single other characters), so an edit reads as
// whole words removed and added rather than scattered letters. It maps
// each distinct token to one rune and lets diffmatchpatch diff the runes,
// as its line mode does for lines.
func WordDiff(before, after string) []WordSpan {
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
		return nil
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // exact; the token cap bounds the work
	var spans []WordSpan
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
	return groupChanges(spans)
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
