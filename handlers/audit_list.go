package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// eventKinds are the kinds the audit filter offers: the actions' and the
// staff's.
var eventKinds = append([]string{queue.EventSubmitted, queue.EventReplayed, queue.EventReused, queue.EventInProgressSeen,
	queue.EventApproved, queue.EventRejected, queue.EventCancelled, queue.EventExpired,
	queue.EventClaimed, queue.EventDelivery, queue.EventDeliveryResult, queue.EventCompleted, queue.EventFailed,
	queue.EventOutcomeConflict, queue.EventTicketOpened, queue.EventTicketResolved}, queue.StaffEventKinds...)

// AuditReader is what the audit page reads of the audit chain.
type AuditReader interface {
	AuditHeadGet(ctx context.Context) (audit.Head, error)
	AuditUnsealedCount(ctx context.Context) (int64, error)
}

const auditPageSize = 100

// AuditList handles GET /audit: the state of the audit chain, then the
// event log, newest first, filtered by kind and actor.
func (d *Dashboard) AuditList(c echo.Context) error {
	v := templates.AuditView{Kind: c.QueryParam("kind"), Actor: c.QueryParam("actor"), Kinds: eventKinds}
	chain, err := d.chainView(c.Request().Context())
	if err != nil {
		return err
	}
	v.Chain = chain
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
	if v.Actions, err = auditActions(c.Request().Context(), d.Store, events); err != nil {
		return err
	}
	p, err := d.page(c, "Audit log", "audit")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.AuditPage(p, v))
}

// auditActions names the events' actions by tool and preview headline,
// read in one query for the page.
func auditActions(ctx context.Context, r queue.Reader, events []queue.Event) (map[string]templates.AuditAction, error) {
	ids := make([]string, 0, len(events))
	for _, e := range events {
		if e.ActionID != "" && !slices.Contains(ids, e.ActionID) {
			ids = append(ids, e.ActionID)
		}
	}
	actions, err := queue.ActionsByID(ctx, r, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]templates.AuditAction, len(actions))
	for id, a := range actions {
		out[id] = templates.AuditAction{Tool: a.Tool, Title: preview.Headline(a)}
	}
	return out, nil
}

// chainView reads the chain's head and its backlog.
func (d *Dashboard) chainView(ctx context.Context) (templates.ChainView, error) {
	head, err := d.Audit.AuditHeadGet(ctx)
	if err != nil {
		return templates.ChainView{}, err
	}
	n, err := d.Audit.AuditUnsealedCount(ctx)
	if err != nil {
		return templates.ChainView{}, err
	}
	v := templates.ChainView{Seq: head.Seq, Hash: head.Hash.String(), SealedAt: head.SealedAt, Unsealed: n}
	if head.LeaseLeft > 0 {
		v.Holder = head.Holder
	}
	if ver := head.Verified; ver != nil {
		v.Verified, v.VerifiedOK, v.VerifiedSeq, v.VerifiedDetail = &ver.At, ver.OK, ver.Seq, ver.Detail
	}
	return v, nil
}
