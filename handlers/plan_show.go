package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ShowPlan handles GET /plans/{id}: the plan's steps, their progress and,
// while it waits, the forms that decide it.
func (d *Dashboard) ShowPlan(c echo.Context) error {
	return d.renderPlan(c, http.StatusOK, templates.PlanView{})
}

// renderPlan renders the plan page with status and v's message and form.
func (d *Dashboard) renderPlan(c echo.Context, status int, v templates.PlanView) error {
	ctx := c.Request().Context()
	pl, err := d.Service.Plans().Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	v.Plan, v.CSRF = pl, stringValue(session(c), csrfValue)
	if u := currentUser(c); u != nil && u.Role.CanDecide() {
		dec, err := d.Service.Staff().Decider(ctx, actor(u))
		if err != nil {
			return err
		}
		v.CanDecide = pl.MayDecide(dec)
	}
	p, err := d.page(c, "Plan: "+pl.Title, "queue")
	if err != nil {
		return err
	}
	return render(c, status, templates.PlanPage(p, v))
}

// PendingPlans are the plans a person must decide, for the queue.
func (d *Dashboard) pendingPlans(c echo.Context) ([]*queue.Plan, error) {
	return d.Service.Plans().List(c.Request().Context(), queue.PlanPending, 50)
}
