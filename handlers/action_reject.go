package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// RejectAction handles POST /actions/{id}/reject (note: the reason, required).
func (d *Dashboard) RejectAction(c echo.Context) error {
	id := c.Param("id")
	form := templates.DecisionForm{RejectNote: c.FormValue("note")}
	res, err := d.Service.Decide(c.Request().Context(), queue.DecideRequest{ID: id, To: queue.StateRejected, By: actor(currentUser(c)), Note: form.RejectNote})
	if err != nil {
		return d.decisionFailed(c, id, err, form, "reject")
	}
	return d.decided(c, res.Action, "Rejected.")
}
