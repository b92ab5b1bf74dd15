package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// SearchActions handles GET /actions: actions by state, tool and intent
// key prefix, newest first.
func (d *Dashboard) SearchActions(c echo.Context) error {
	v := templates.SearchView{Now: d.Service.Now(), State: c.QueryParam("state"), Tool: c.QueryParam("tool"),
		IntentKey: c.QueryParam("intent_key"), Tools: toolNames(d.Service)}
	p, err := d.page(c, "Search", "search")
	if err != nil {
		return err
	}
	if v.State != "" && !queue.State(v.State).Valid() {
		err := queue.Errorf(queue.CodeInvalidRequest, "state %q is not a state", v.State)
		v.Error = err.Detail
		return fail(c, err, templates.SearchPage(p, v))
	}
	list, next, err := d.Service.List(c.Request().Context(), queue.ListRequest{State: queue.State(v.State), Tool: v.Tool,
		IntentKeyPrefix: v.IntentKey, Cursor: c.QueryParam("cursor"), Limit: templates.DefaultPageSize})
	if err != nil {
		if qe, ok := err.(*queue.Error); ok {
			v.Error = qe.Detail
			return fail(c, err, templates.SearchPage(p, v))
		}
		return err
	}
	v.Actions, v.Next = list, next
	return render(c, http.StatusOK, templates.SearchPage(p, v))
}
