package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// eventKinds are the kinds the audit filter offers.
var eventKinds = []string{queue.EventSubmitted, queue.EventReplayed, queue.EventReused, queue.EventInProgressSeen,
	queue.EventApproved, queue.EventRejected, queue.EventCancelled, queue.EventExpired,
	queue.EventClaimed, queue.EventDelivery, queue.EventDeliveryResult, queue.EventCompleted, queue.EventFailed,
	queue.EventOutcomeConflict, queue.EventTicketOpened, queue.EventTicketResolved,
	queue.EventSignedIn, queue.EventSignInRefused}

const auditPageSize = 100

// AuditList handles GET /audit: the event log, newest first, filtered by
// kind and actor.
func (d *Dashboard) AuditList(c echo.Context) error {
	v := templates.AuditView{Kind: c.QueryParam("kind"), Actor: c.QueryParam("actor"), Kinds: eventKinds}
	var before int64
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			return queue.Errorf(queue.CodeInvalidRequest, "before must be an event id")
		}
		before = n
	}
	events, err := d.Store.EventList(c.Request().Context(), queue.EventListParams{Kind: v.Kind, Actor: v.Actor,
		BeforeID: before, Limit: auditPageSize + 1})
	if err != nil {
		return err
	}
	if len(events) > auditPageSize {
		events = events[:auditPageSize]
		v.Before = events[len(events)-1].ID
	}
	v.Events = events
	p, err := d.page(c, "Audit log", "audit")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.AuditPage(p, v))
}
