package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// BulkDecide handles POST /actions/bulk (ids repeated, decision approve or
// reject, note): each action is its own exactly-once decision, and the
// answer (200) lists every selected action with its outcome. A rejection
// without a note re-shows the queue with the selection and the error (422).
func (d *Dashboard) BulkDecide(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return queue.Errorf(queue.CodeInvalidRequest, "the form could not be read: %s", err)
	}
	r := queue.BulkRequest{IDs: form["ids"], Decision: form.Get("decision"), Note: strings.TrimSpace(form.Get("note")),
		By: actor(currentUser(c))}
	results, err := d.Service.Bulk(c.Request().Context(), r)
	if errors.Is(err, queue.ErrBulkNoteRequired) {
		return d.bulkFormAgain(c, r, queue.ErrBulkNoteRequired.Detail)
	}
	if err != nil {
		return err
	}
	v := templates.BulkView{Decision: r.Decision, Note: r.Note}
	for _, res := range results {
		row := templates.BulkRow{BulkResult: res}
		if res.Action != nil {
			row.Title = preview.Headline(res.Action)
		}
		v.Rows = append(v.Rows, row)
	}
	if isHX(c) {
		return render(c, http.StatusOK, templates.BulkResultFragment(v))
	}
	p, err := d.page(c, "Bulk decision", "queue")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.BulkResultPage(p, v))
}

// bulkFormAgain re-shows the first page of the queue with the selection
// still ticked, the note as typed and the error: 422, nothing decided.
func (d *Dashboard) bulkFormAgain(c echo.Context, r queue.BulkRequest, msg string) error {
	v, err := d.queueView(c, "", "", templates.DefaultPageSize, false)
	if err != nil {
		return err
	}
	v.Bulk.Note, v.Bulk.Error = r.Note, msg
	v.Bulk.Selected = make(map[string]bool, len(r.IDs))
	for _, id := range r.IDs {
		v.Bulk.Selected[id] = true
	}
	if isHX(c) {
		return render(c, http.StatusUnprocessableEntity, templates.QueueFragment(v, false))
	}
	p, err := d.page(c, "Queue", "queue")
	if err != nil {
		return err
	}
	p.Live = true
	return render(c, http.StatusUnprocessableEntity, templates.QueuePage(p, v))
}

// bulkForm is the queue's selection form for the signed-in user: only
// those who decide see the checkboxes.
func (d *Dashboard) bulkForm(c echo.Context) templates.BulkForm {
	f := templates.BulkForm{}
	if u := currentUser(c); u != nil {
		f.CanDecide = u.Role.CanDecide()
	}
	if s := session(c); s != nil {
		f.CSRF = stringValue(s, csrfValue)
	}
	return f
}
