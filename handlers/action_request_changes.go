package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// RequestChangesAction handles POST /actions/{id}/request-changes (note:
// what should change, required). The action becomes changes_requested,
// final for this attempt: the agent revises the payload as the note asks
// and submits again with the same intent key. Roles and rules are reject's.
func (d *Dashboard) RequestChangesAction(c echo.Context) error {
	id := c.Param("id")
	form := templates.DecisionForm{ChangesNote: c.FormValue("note")}
	res, err := d.Service.Decide(c.Request().Context(), queue.DecideRequest{ID: id, To: queue.StateChangesRequested, By: actor(currentUser(c)), Note: form.ChangesNote})
	if err != nil {
		return d.decisionFailed(c, id, err, form, "request_changes")
	}
	return d.decided(c, res.Action, "Changes requested.")
}
