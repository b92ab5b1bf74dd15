package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

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
	for _, t := range tickets {
		v.Tickets = append(v.Tickets, templates.TicketRow{Ticket: t, Action: actions[t.ActionID]})
	}
	return v, nil
}

// ticketRow joins a ticket with its action. Tickets are few (each is an
// operator's to-do), so one read per ticket is cheap enough.
func (d *Dashboard) ticketRow(ctx context.Context, t *queue.Ticket) (templates.TicketRow, error) {
	a, err := d.Store.ActionGetByID(ctx, t.ActionID)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		return templates.TicketRow{}, err
	}
	return templates.TicketRow{Ticket: t, Action: a}, nil
}
