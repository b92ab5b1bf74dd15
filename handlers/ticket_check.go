package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// CheckTicket handles POST /tickets/{id}/check: "Check now" asks the
// verifier of the ticket's action at once, records the check and applies
// the tool's resolve mode, as the sweep's check would. 303 to /tickets, or
// for htmx 200 and the updated ticket.
func (d *Dashboard) CheckTicket(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	t, err := d.ticketByID(ctx, id)
	if err != nil {
		return err
	}
	check, err := d.Service.Tickets().Verify(ctx, queue.VerifyRequest{ActionID: t.ActionID, By: actor(currentUser(c))})
	if err != nil {
		return d.resolveFailed(c, id, err, templates.ResolveForm{})
	}
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, "/tickets")
	}
	if t, err = d.Store.TicketGetByID(ctx, id); err != nil {
		return err
	}
	row, err := d.ticketRow(ctx, t, listedChecks)
	if err != nil {
		return err
	}
	row.Notice = fmt.Sprintf("Checked: %s (%s).", check.Verdict, check.Reason)
	return render(c, http.StatusOK, templates.TicketCard(d.ticketsBase(c, ""), row))
}

// verifyChecks adds the verifier's checks of the row's action, newest
// first (at most limit of them; 0: all), and the proof a person may accept
// with one click.
func (d *Dashboard) verifyChecks(ctx context.Context, row *templates.TicketRow, limit int) error {
	a := row.Action
	tool, _ := d.Service.Registry().Lookup(a.Tool)
	row.Verifier = tool.HasVerifier()
	var events []queue.Event
	for {
		p := queue.EventListParams{ActionID: a.ID, Kind: queue.EventVerified, Limit: 500}
		if limit > 0 {
			p.Limit = limit
		}
		if n := len(events); n > 0 {
			p.BeforeID = events[n-1].ID
		}
		page, err := d.Store.EventList(ctx, p)
		if err != nil {
			return err
		}
		events = append(events, page...)
		if limit > 0 || len(page) < p.Limit {
			break
		}
	}
	if !row.Verifier && len(events) == 0 {
		return nil
	}
	for _, ev := range events {
		var data struct {
			Verdict string          `json:"verdict"`
			Reason  string          `json:"reason"`
			Answer  json.RawMessage `json:"answer"`
			Text    string          `json:"answer_text"`
			Result  json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		v := templates.VerifyCheckView{Verdict: data.Verdict, Reason: data.Reason, At: ev.At, Answer: data.Text}
		if len(data.Answer) > 0 {
			v.Answer = templates.PrettyJSON(data.Answer)
		}
		if len(data.Result) > 0 && string(data.Result) != "null" {
			v.Result, v.ResultJSON = templates.PrettyJSON(data.Result), string(data.Result)
		}
		switch data.Verdict {
		case classify.VerdictDone:
			v.Outcome = string(queue.StateDone)
		case classify.VerdictNotDone:
			v.Outcome = string(queue.StateFailed)
		}
		if v.Outcome != "" {
			v.Note = queue.VerifiedNote(classify.VerifyOutcome{Verdict: v.Verdict, Reason: v.Reason}) + " at " + templates.FormatTime(ev.At)
		}
		row.Checks = append(row.Checks, v)
	}
	if len(row.Checks) > 0 && row.Checks[0].Outcome != "" && row.Ticket.Kind == queue.TicketStale {
		row.Suggested = &row.Checks[0]
	}
	if row.Verifier && row.Ticket.State == queue.TicketOpen {
		// An unknown verdict changes nothing and shows when the next check is due.
		sched, err := d.Store.TicketCheckGet(ctx, row.Ticket.ID)
		switch {
		case errors.Is(err, queue.ErrNotFound):
		case err != nil:
			return err
		case sched.Verdict == classify.VerdictUnknown:
			row.NextCheck = &sched.NextAt
		}
	}
	return nil
}
