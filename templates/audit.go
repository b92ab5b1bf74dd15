package templates

import (
	"net/url"
	"strconv"

	"github.com/approvals/approvals/queue"
)

// AuditView is the event log, newest first.
type AuditView struct {
	Kind   string
	Actor  string
	Kinds  []string
	Events []queue.Event
	// Before is the id to continue from for older events; 0 at the end.
	Before int64
}

// OlderURL is the next page of older events.
func (v AuditView) OlderURL() string {
	q := url.Values{}
	if v.Kind != "" {
		q.Set("kind", v.Kind)
	}
	if v.Actor != "" {
		q.Set("actor", v.Actor)
	}
	q.Set("before", strconv.FormatInt(v.Before, 10))
	return "/audit?" + q.Encode()
}
