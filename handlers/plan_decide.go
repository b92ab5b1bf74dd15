package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ApprovePlan handles POST /plans/{id}/approve (note optional).
func (d *Dashboard) ApprovePlan(c echo.Context) error {
	return d.decidePlan(c, queue.PlanApproved)
}

// RejectPlan handles POST /plans/{id}/reject (note: the reason, required).
func (d *Dashboard) RejectPlan(c echo.Context) error {
	return d.decidePlan(c, queue.PlanRejected)
}

// RequestPlanChanges handles POST /plans/{id}/request_changes (note required).
func (d *Dashboard) RequestPlanChanges(c echo.Context) error {
	return d.decidePlan(c, queue.PlanChangesRequested)
}

// decidePlan records one decision and answers 303 to the plan's page; a
// refusal re-shows the page with the error and its status, changing
// nothing.
func (d *Dashboard) decidePlan(c echo.Context, to queue.PlanState) error {
	id, note := c.Param("id"), c.FormValue("note")
	_, err := d.Service.Plans().Decide(c.Request().Context(), queue.PlanDecideRequest{ID: id, To: to, By: actor(currentUser(c)), Note: note})
	var e *queue.Error
	if errors.As(err, &e) && e.Code != queue.CodeNotFound {
		return d.renderPlan(c, problem.Status(e.Code), templates.PlanView{Error: e.Detail, Note: note})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/plans/"+id)
}
