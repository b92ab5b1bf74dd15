package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ShowTicket handles GET /tickets/{id}: the ticket page, one ticket with its
// action, the verifier's checks and the forms to resolve it.
func (d *Dashboard) ShowTicket(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := d.ticketByID(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	row, err := d.ticketRow(ctx, t, allChecks)
	if err != nil {
		return err
	}
	p, err := d.page(c, "Ticket", "tickets")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.TicketPage(p, d.ticketsBase(c, ""), row))
}

// ticketByID reads ticket id, or answers 404 naming it.
func (d *Dashboard) ticketByID(ctx context.Context, id string) (*queue.Ticket, error) {
	t, err := d.Store.TicketGetByID(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, notFound("ticket", id)
	}
	return t, err
}
