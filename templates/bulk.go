package templates

import (
	"strconv"

	"github.com/approvals/approvals/queue"
)

// BulkForm is the queue's selection form: one note for the selected
// actions and the buttons that approve or reject them all.
type BulkForm struct {
	CanDecide bool
	CSRF      string
	Note      string
	// Selected keeps the ticked ids when the form is re-shown with Error.
	Selected map[string]bool
	Error    string
}

// BulkView answers a bulk decision: one row per selected action.
type BulkView struct {
	Decision string // approve or reject
	Note     string
	Rows     []BulkRow
}

// BulkRow is one selected action and what the decision did to it.
type BulkRow struct {
	queue.BulkResult
	Title string // the preview title; empty for an unknown id
}

// OutcomeText is the row's outcome in the words docs/dashboard.md uses:
// "decided", "already decided by EMAIL", "not allowed" or "not pending".
func (r BulkRow) OutcomeText() string {
	if r.Outcome == queue.BulkAlreadyDecided {
		return string(r.Outcome) + " by " + r.DecidedBy
	}
	return string(r.Outcome)
}

// Counts summarises the outcomes: "2 decided, 1 not pending".
func (v BulkView) Counts() string {
	order := []queue.BulkOutcome{queue.BulkDecided, queue.BulkAlreadyDecided, queue.BulkNotAllowed, queue.BulkNotPending}
	n := map[queue.BulkOutcome]int{}
	for _, r := range v.Rows {
		n[r.Outcome]++
	}
	s := ""
	for _, o := range order {
		if n[o] == 0 {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += strconv.Itoa(n[o]) + " " + string(o)
	}
	return s
}

func (v BulkView) verb() string {
	if v.Decision == "reject" {
		return "Reject"
	}
	return "Approve"
}

func outcomeClass(o queue.BulkOutcome) string {
	switch o {
	case queue.BulkDecided:
		return "badge badge-ok"
	case queue.BulkAlreadyDecided:
		return "badge badge-info"
	default:
		return "badge badge-warn"
	}
}

// Plural counts a noun: "1 selected action", "3 selected actions".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
