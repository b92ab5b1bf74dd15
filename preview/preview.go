// Package preview renders what a person reads to decide on an action: its
// title and the fields its tool's preview templates draw from the payload.
// Every face that shows an action (the dashboard, Slack, email) renders it
// from here, so they all show the same words.
package preview

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/queue"
)

// Preview is what a person reads to decide on an action: the title and the
// fields its tool's preview templates render from the payload.
type Preview struct {
	Title  string
	Fields []Field // short one-line fields first, then long ones; by name within each
}

// Field is one labelled value of a preview.
type Field struct {
	Name  string
	Value string
}

// Of renders the action's preview templates from its tool snapshot. An action whose
// payload is not an object, or whose tool has no preview, has an empty preview.
func Of(a *queue.Action) Preview {
	payload, err := queue.DecodeObject(a.Payload)
	if err != nil {
		return Preview{}
	}
	rendered := a.Spec.RenderPreview(payload)
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if name != "title" {
			names = append(names, name)
		}
	}
	// Short one-line fields (to, channel) read best before long ones (body).
	long := func(name string) bool {
		v := rendered[name]
		return len(v) > 80 || strings.Contains(v, "\n")
	}
	sort.Slice(names, func(i, j int) bool {
		if li, lj := long(names[i]), long(names[j]); li != lj {
			return lj
		}
		return names[i] < names[j]
	})
	p := Preview{Title: rendered["title"], Fields: make([]Field, 0, len(names))}
	for _, name := range names {
		p.Fields = append(p.Fields, Field{Name: name, Value: rendered[name]})
	}
	return p
}

// Headline is the one line that names an action where there is room for one line only (an
// email subject, a chat fallback): the first line of the preview title, else of the first
// preview field, else the compact payload; cut at 120 characters.
func Headline(a *queue.Action) string {
	const limit = 120
	p := Of(a)
	var s string
	switch {
	case strings.TrimSpace(p.Title) != "":
		s = p.Title
	case len(p.Fields) > 0:
		s = p.Fields[0].Name + ": " + p.Fields[0].Value
	default:
		var b bytes.Buffer
		if json.Compact(&b, a.Payload) == nil {
			s = queue.ReadableJSON(b.String())
		} else {
			s = string(a.Payload)
		}
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return s
}
