package templates

import (
	"net/url"
	"strconv"
	"time"

	"github.com/approvals/approvals/queue"
)

// QueueView is the approval queue: pending actions, oldest first.
type QueueView struct {
	Now   time.Time
	Rows  []QueueRow
	Tools []string // for the filter
	Tool  string
	// Mine is the "waiting for me" filter: pending actions the viewer may
	// decide and has not approved yet.
	Mine   bool
	Cursor string // of this page; "" for the first
	Next   string // cursor of the next page; "" at the end
	Limit  int
	// OpenTickets refreshes the count in the header when the fragment is
	// reloaded.
	OpenTickets int64
	// Bulk is the selection form; its checkboxes show for those who decide.
	Bulk BulkForm
	// Plans are the pending plans: each one item, decided on its page.
	Plans []*queue.Plan
}

// QueueRow is one pending action.
type QueueRow struct {
	Action *queue.Action
	Title  string
}

func (v QueueView) query(cursor string) string {
	q := url.Values{}
	if v.Tool != "" {
		q.Set("tool", v.Tool)
	}
	if v.Mine {
		q.Set("mine", "1")
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if v.Limit != 0 && v.Limit != DefaultPageSize {
		q.Set("limit", strconv.Itoa(v.Limit))
	}
	if len(q) == 0 {
		return "/"
	}
	return "/?" + q.Encode()
}

// SrcURL reloads this page of the queue.
func (v QueueView) SrcURL() string { return v.query(v.Cursor) }

// NextURL is the next page.
func (v QueueView) NextURL() string { return v.query(v.Next) }

// FirstURL is the first page with the same filter.
func (v QueueView) FirstURL() string { return v.query("") }

// DefaultPageSize is the number of rows of a listing page.
const DefaultPageSize = 50
