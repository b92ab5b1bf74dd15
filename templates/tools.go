package templates

import (
	"strconv"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// ToolsView is the registry.
type ToolsView struct {
	Tools []classify.Tool
	Hash  string
	// ShowURLPaths shows URLs whose path is a credential whole (admins).
	ShowURLPaths bool
	// Hits are how often each rule decided, by tool and rule.
	Hits map[string]map[string]queue.PolicyHit
}

func (v ToolsView) hits(tool, rule string) queue.PolicyHit { return v.Hits[tool][rule] }

func count(n int64) string { return strconv.FormatInt(n, 10) }

// grantsText says whether and how far the tool takes grants.
func grantsText(t classify.Tool) string {
	l, err := t.GrantLimits()
	if err != nil {
		return "none: " + err.Error()
	}
	s := "allowed, for up to " + classify.FormatDuration(l.Max)
	uses := queue.DefaultGrantUses
	if l.MaxUses > 0 {
		s += " and " + strconv.Itoa(l.MaxUses) + " actions each"
		uses = min(uses, l.MaxUses)
	}
	// What a grant of no chosen number gets, and what ends one early.
	return s + " (" + strconv.Itoa(uses) + " unless the approver chooses; each ends when its granting user may no longer approve the tool)"
}

func previewNames(t classify.Tool) []string { return sortedKeys(t.Preview) }
