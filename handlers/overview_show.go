package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/templates"
)

// ShowOverview handles GET /overview: the health of the queue for every
// member of staff, computed at most every OverviewMaxAge per process.
func (d *Dashboard) ShowOverview(c echo.Context) error {
	o, err := d.overview.Get(c.Request().Context(), d.Store, d.Service.Now())
	if err != nil {
		return err
	}
	p, err := d.page(c, "Overview", "overview")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.OverviewPage(p, templates.OverviewView{Overview: o}))
}
