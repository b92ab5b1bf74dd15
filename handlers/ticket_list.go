package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// TicketList handles GET /tickets (state=open, the default; resolved; all).
func (d *Dashboard) TicketList(c echo.Context) error {
	state := c.QueryParam("state")
	switch state {
	case "", string(queue.TicketOpen):
		state = string(queue.TicketOpen)
	case string(queue.TicketResolved):
	case "all":
		state = ""
	default:
		return queue.Errorf(queue.CodeInvalidRequest, "state must be open, resolved or all")
	}
	v, err := d.ticketsView(c, state)
	if err != nil {
		return err
	}
	p, err := d.page(c, "Tickets", "tickets")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.TicketsPage(p, v))
}

// ticketsBase is a tickets view without tickets: what one card needs.
func (d *Dashboard) ticketsBase(c echo.Context, state string) templates.TicketsView {
	v := templates.TicketsView{Now: d.Service.Now(), State: state, CSRF: stringValue(session(c), csrfValue), ShowURLPaths: isAdmin(c)}
	if u := currentUser(c); u != nil {
		v.CanResolve = u.Role.CanResolve()
	}
	return v
}

func (d *Dashboard) ticketsView(c echo.Context, state string) (templates.TicketsView, error) {
	ctx := c.Request().Context()
	v := d.ticketsBase(c, state)
	tickets, err := d.Store.TicketList(ctx, queue.TicketListParams{State: queue.TicketState(state), Limit: 200})
	if err != nil {
		return v, err
	}
	ids := make([]string, 0, len(tickets))
	for _, t := range tickets {
		ids = append(ids, t.ActionID)
	}
	actions, err := queue.ActionsByID(ctx, d.Store, ids) // one query for the page
	if err != nil {
		return v, err
	}
	// Open tickets first: they are the operator's to-do.
	slices.SortStableFunc(tickets, func(a, b *queue.Ticket) int {
		return cmp.Compare(ticketRank(a), ticketRank(b))
	})
	for _, t := range tickets {
		row := templates.TicketRow{Ticket: t, Action: actions[t.ActionID]}
		if err := d.ticketContext(ctx, &row, listedChecks); err != nil {
			return v, err
		}
		v.Tickets = append(v.Tickets, row)
	}
	return v, nil
}

func ticketRank(t *queue.Ticket) int {
	if t.State == queue.TicketOpen {
		return 0
	}
	return 1
}

// listedChecks is how many of a ticket's verifier checks the list shows
// (the newest); the ticket page shows them all (allChecks).
const (
	listedChecks = 20
	allChecks    = 0
)

// ticketContext adds what an operator needs to settle the ticket without
// looking it up: for a conflict, which report contradicted which outcome,
// and any newer attempt of the intent; checks is how many of the
// verifier's checks (listedChecks or allChecks).
func (d *Dashboard) ticketContext(ctx context.Context, row *templates.TicketRow, checks int) error {
	a := row.Action
	if a == nil {
		return nil
	}
	row.Title = a.Tool + ": " + preview.Headline(a)
	if err := d.verifyChecks(ctx, row, checks); err != nil {
		return err
	}
	if row.Ticket.Kind == queue.TicketConflict {
		events, err := queue.Timeline(ctx, d.Store, a.ID)
		if err != nil {
			return err
		}
		row.Conflict = conflictView(events)
	}
	if a.Class == classify.AtLeastOnce || a.IntentKey == "" {
		return nil
	}
	attempts, err := d.Store.ActionList(ctx, queue.ActionListParams{IntentKey: a.IntentKey, Limit: 200})
	if err != nil {
		return err
	}
	for _, o := range attempts {
		if o.Attempt > a.Attempt && (row.Newer == nil || o.Attempt > row.Newer.Attempt) {
			row.Newer = o
		}
	}
	return nil
}

// conflictView is what the last contradicting report said, and what had
// settled the action before it: an operator's resolution, or a report.
func conflictView(events []queue.Event) *templates.ConflictView {
	var settled *queue.Event
	var c *templates.ConflictView
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case queue.EventTicketResolved, queue.EventCompleted, queue.EventFailed:
			settled = e
		case queue.EventOutcomeConflict:
			var data struct {
				Report      string `json:"report"`
				StoredState string `json:"stored_state"`
				Error       string `json:"error"`
			}
			_ = json.Unmarshal(e.Data, &data)
			c = &templates.ConflictView{Reporter: e.Actor, Report: data.Report, Stored: data.StoredState, Error: data.Error, At: e.At}
			if r, ok := jsonField(e.Data, "result"); ok {
				c.Result = templates.PrettyJSON(r)
			}
			if settled != nil {
				var note struct {
					Note string `json:"note"`
				}
				_ = json.Unmarshal(settled.Data, &note)
				c.SettledBy, c.SettledKind, c.SettledAt, c.SettledNote = settled.Actor, settled.Kind, settled.At, note.Note
			}
		}
	}
	return c
}

// jsonField is the raw value of key in the JSON object raw.
func jsonField(raw []byte, key string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	v, ok := m[key]
	return v, ok && len(v) > 0 && string(v) != "null"
}

// ticketRow joins a ticket with its action. Tickets are few (each is an
// operator's to-do), so one read per ticket is cheap enough.
func (d *Dashboard) ticketRow(ctx context.Context, t *queue.Ticket, checks int) (templates.TicketRow, error) {
	a, err := d.Store.ActionGetByID(ctx, t.ActionID)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		return templates.TicketRow{}, err
	}
	row := templates.TicketRow{Ticket: t, Action: a}
	return row, d.ticketContext(ctx, &row, checks)
}
