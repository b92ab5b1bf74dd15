package templates

import (
	"net/url"
	"strconv"
	"time"

	"github.com/approvals/approvals/queue"
)

// AuditView is the event log, newest first, under the state of the audit
// chain that seals it.
type AuditView struct {
	Chain  ChainView
	Kind   string
	Actor  string
	Kinds  []string
	Events []queue.Event
	// Actions name the events' actions by tool and preview title.
	Actions map[string]AuditAction
	// Before is the id to continue from for older events; 0 at the end.
	Before int64
}

// AuditAction names an action in the log.
type AuditAction struct {
	Tool, Title string
}

// ChainView is the state of the audit chain (package audit).
type ChainView struct {
	// Seq and Hash are the last sealed link; SealedAt when it was sealed
	// (nil: never).
	Seq      int64
	Hash     string
	SealedAt *time.Time
	// Unsealed counts the events waiting for the sealer.
	Unsealed int64
	// Holder is the process sealing (its lease unexpired), "" for none.
	Holder string
	// Verified is when `approvals audit verify` last checked the
	// database, nil for never; VerifiedOK its result, VerifiedSeq how far
	// it got, VerifiedDetail what it found.
	Verified       *time.Time
	VerifiedOK     bool
	VerifiedSeq    int64
	VerifiedDetail string
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

// plural is one or many, by n.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
