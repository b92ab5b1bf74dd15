package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// Queue handles GET /: pending approvals, oldest first, one keyset page.
// With HX-Request it answers only the table (the live reload).
func (d *Dashboard) Queue(c echo.Context) error {
	ctx := c.Request().Context()
	limit, err := pageSize(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	v, err := d.queueView(c, c.QueryParam("tool"), c.QueryParam("cursor"), limit, c.QueryParam("mine") == "1")
	if err != nil {
		return err
	}
	if isHX(c) {
		if v.OpenTickets, err = d.Store.TicketCountOpen(ctx); err != nil {
			return err
		}
		return render(c, http.StatusOK, templates.QueueFragment(v, true))
	}
	p, err := d.page(c, "Queue", "queue")
	if err != nil {
		return err
	}
	p.Live = true
	if v.Plans, err = d.pendingPlans(c); err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.QueuePage(p, v))
}

// queueView is one keyset page of pending actions, oldest first, as GET /
// shows it (the bulk decision's answer re-shows it too); mine keeps the
// ones the signed-in user may decide and has not approved.
func (d *Dashboard) queueView(c echo.Context, tool, cursor string, limit int, mine bool) (templates.QueueView, error) {
	v := templates.QueueView{Now: d.Service.Now(), Tool: tool, Cursor: cursor,
		Limit: limit, Tools: toolNames(d.Service), Bulk: d.bulkForm(c), Mine: mine}
	req := queue.ListRequest{State: queue.StatePending, Oldest: true, Tool: tool, Cursor: cursor, Limit: limit}
	switch u := currentUser(c); {
	case mine && !u.Role.CanDecide():
		// Nothing waits for a role that decides nothing.
		return v, nil
	case mine:
		req.WaitingFor = actor(u)
	}
	list, next, err := d.Service.List(c.Request().Context(), req)
	if err != nil {
		return v, err
	}
	v.Next = next
	for _, a := range list {
		v.Rows = append(v.Rows, templates.QueueRow{Action: a, Title: preview.Headline(a)})
	}
	return v, nil
}

func pageSize(s string) (int, error) {
	if s == "" {
		return templates.DefaultPageSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 200 {
		return 0, queue.Errorf(queue.CodeInvalidRequest, "limit must be a whole number from 1 to 200")
	}
	return n, nil
}

func toolNames(s *queue.Service) []string {
	tools := s.Registry().Tools()
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// previewFields is the action's rendered preview (preview.Of, which the
// notification channels share) as the templates' fields.
func previewFields(a *queue.Action) (string, []templates.Field) {
	p := preview.Of(a)
	fields := make([]templates.Field, len(p.Fields))
	for i, f := range p.Fields {
		fields[i] = templates.Field{Name: f.Name, Value: f.Value}
	}
	return p.Title, fields
}
