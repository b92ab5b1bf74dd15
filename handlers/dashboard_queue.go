package handlers

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

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
	v := templates.QueueView{Now: d.Service.Now(), Tool: c.QueryParam("tool"), Cursor: c.QueryParam("cursor"),
		Limit: limit, Tools: toolNames(d.Service), Bulk: d.bulkForm(c), Mine: c.QueryParam("mine") == "1"}
	req := queue.ListRequest{State: queue.StatePending, Oldest: true, Tool: v.Tool, Cursor: v.Cursor, Limit: limit}
	var list []*queue.Action
	var next string
	switch u := currentUser(c); {
	case v.Mine && !u.Role.CanDecide():
		// Nothing waits for a role that decides nothing.
	case v.Mine:
		req.WaitingFor = actor(u)
		fallthrough
	default:
		if list, next, err = d.Service.List(ctx, req); err != nil {
			return err
		}
	}
	v.Next = next
	for _, a := range list {
		v.Rows = append(v.Rows, templates.QueueRow{Action: a, Title: previewTitle(a)})
	}
	if isHX(c) {
		if v.OpenTickets, err = d.Service.TicketCountOpen(ctx); err != nil {
			return err
		}
		return render(c, http.StatusOK, templates.QueueFragment(v, true))
	}
	p, err := d.page(c, "Queue", "queue")
	if err != nil {
		return err
	}
	p.Live = true
	return render(c, http.StatusOK, templates.QueuePage(p, v))
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

// previewTitle is the one line that names an action in a list: the tool's
// preview title, else its first preview field, else the payload itself.
func previewTitle(a *queue.Action) string {
	title, fields := preview(a)
	switch {
	case title != "":
		return title
	case len(fields) > 0:
		return fields[0].Name + ": " + fields[0].Value
	}
	return templates.CompactJSON(a.Payload, 120)
}

// preview renders the action's preview templates from its tool snapshot:
// the title, and the other fields in name order.
func preview(a *queue.Action) (string, []templates.Field) {
	payload, err := queue.DecodeObject(a.Payload)
	if err != nil {
		return "", nil
	}
	rendered := a.Spec.RenderPreview(payload)
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if name != "title" {
			names = append(names, name)
		}
	}
	// Short one-line fields (to, channel) read best before long ones (body).
	long := func(name string) bool {
		v := rendered[name]
		return len(v) > 80 || strings.Contains(v, "\n")
	}
	sort.Slice(names, func(i, j int) bool {
		if li, lj := long(names[i]), long(names[j]); li != lj {
			return lj
		}
		return names[i] < names[j]
	})
	fields := make([]templates.Field, 0, len(names))
	for _, name := range names {
		fields = append(fields, templates.Field{Name: name, Value: rendered[name]})
	}
	return rendered["title"], fields
}
