package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ResolveTicket handles POST /tickets/{id}/resolve (outcome done|failed,
// note, optional result JSON): an operator's finding. 303 to /tickets, or
// for htmx 200 and the updated ticket.
func (d *Dashboard) ResolveTicket(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	form := templates.ResolveForm{Outcome: c.FormValue("outcome"), Note: c.FormValue("note"), Result: c.FormValue("result")}
	var result json.RawMessage
	if strings.TrimSpace(form.Result) != "" && form.Outcome == string(queue.StateDone) {
		if err := checkResult(form.Result); err != nil {
			return d.resolveFailed(c, id, err, form)
		}
		result = json.RawMessage(form.Result)
	}
	a, t, err := d.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: id, By: actor(currentUser(c)),
		Outcome: queue.State(form.Outcome), Result: result, Note: form.Note})
	if err != nil {
		return d.resolveFailed(c, id, err, form)
	}
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, "/tickets")
	}
	row := templates.TicketRow{Ticket: t, Action: a, Notice: "Resolved: " + form.Outcome + "."}
	return render(c, http.StatusOK, templates.TicketCard(d.ticketsBase(c, ""), row))
}

// checkResult refuses an operator's result that storage cannot hold.
func checkResult(s string) error {
	_, err := queue.StorableJSON([]byte(s), "result", false, queue.CodeInvalidRequest)
	return err
}

// resolveFailed re-shows the ticket with the error and what was typed.
func (d *Dashboard) resolveFailed(c echo.Context, id string, err error, form templates.ResolveForm) error {
	var qe *queue.Error
	if !errors.As(err, &qe) {
		return err
	}
	ctx := c.Request().Context()
	t, gerr := d.Store.TicketGetByID(ctx, id)
	if errors.Is(gerr, queue.ErrNotFound) {
		return notFound("ticket", id)
	}
	if gerr != nil {
		return gerr
	}
	form.Error = qe.Detail
	if qe.Code == queue.CodeTicketResolved {
		form.Error = "Nothing was changed: " + qe.Detail + "."
	}
	row, rerr := d.ticketRow(ctx, t, listedChecks)
	if rerr != nil {
		return rerr
	}
	row.Form = form
	if isHX(c) {
		return fail(c, err, templates.TicketCard(d.ticketsBase(c, ""), row))
	}
	v, verr := d.ticketsView(c, string(queue.TicketOpen))
	if verr != nil {
		return verr
	}
	v.Tickets = replaceTicket(v.Tickets, row)
	p, perr := d.page(c, "Tickets", "tickets")
	if perr != nil {
		return perr
	}
	return fail(c, err, templates.TicketsPage(p, v))
}

// replaceTicket puts row in place of the listed ticket with its id, or
// first when the list no longer has it (it was resolved meanwhile).
func replaceTicket(rows []templates.TicketRow, row templates.TicketRow) []templates.TicketRow {
	for i := range rows {
		if rows[i].Ticket.ID == row.Ticket.ID {
			rows[i] = row
			return rows
		}
	}
	return append([]templates.TicketRow{row}, rows...)
}
