package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ApproveAction handles POST /actions/{id}/approve (note, optional payload:
// the edited JSON). It succeeds once: 303 to the action (200 and the
// fragment for htmx); the same approver repeating it gets the same answer.
func (d *Dashboard) ApproveAction(c echo.Context) error {
	id := c.Param("id")
	form := templates.DecisionForm{Note: strings.TrimSpace(c.FormValue("note")), Payload: c.FormValue("payload")}
	var edited json.RawMessage
	if strings.TrimSpace(form.Payload) != "" {
		if err := checkEditedPayload(form.Payload); err != nil {
			return d.decisionFailed(c, id, err, form, "approve")
		}
		edited = json.RawMessage(form.Payload)
	}
	verb, notice := "approve", "Approved."
	var grant *queue.GrantRequest
	if c.FormValue("grant_for") != "" {
		verb, notice = "grant", "Approved, and similar actions are allowed: see Grants."
		form.Grant = templates.GrantForm{For: c.FormValue("grant_for"), Uses: c.FormValue("grant_uses"),
			Agent: c.FormValue("grant_agent"), Fields: c.Request().Form["grant_fields"]}
		var err error
		if grant, err = grantRequest(form.Grant); err != nil {
			return d.decisionFailed(c, id, err, form, verb)
		}
	}
	res, err := d.Service.Decide(c.Request().Context(), queue.DecideRequest{ID: id, To: queue.StateApproved, By: actor(currentUser(c)),
		Note: form.Note, Payload: edited, Grant: grant})
	if err != nil {
		return d.decisionFailed(c, id, err, form, verb)
	}
	return d.decided(c, res.Action, notice)
}

// grantRequest reads "Approve and allow similar": grant_for (a Go
// duration), grant_uses (optional, at least 1), grant_agent (this or any)
// and grant_fields (payload paths); the Service checks them against the
// tool's limits.
func grantRequest(f templates.GrantForm) (*queue.GrantRequest, error) {
	d, err := time.ParseDuration(f.For)
	if err != nil || d <= 0 {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "grant_for must be a Go duration such as 8h, not %q", f.For)
	}
	g := &queue.GrantRequest{For: d, Fields: f.Fields}
	if f.Uses != "" {
		n, err := strconv.Atoi(f.Uses)
		if err != nil || n < 1 {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "grant_uses must be a whole number of at least 1, not %q", f.Uses)
		}
		g.Uses = n
	}
	switch f.Agent {
	case "", "this":
	case "any":
		g.AnyAgent = true
	default:
		return nil, queue.Errorf(queue.CodeInvalidRequest, "grant_agent must be this or any, not %q", f.Agent)
	}
	if len(f.Fields) > queue.MaxGrantFields {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "grant_fields names %d fields; at most %d", len(f.Fields), queue.MaxGrantFields)
	}
	return g, nil
}

// checkEditedPayload refuses what PostgreSQL's jsonb cannot store before
// the service sees it. Not JSON, or not an object, is the approver's typo:
// 422 with the form, as a payload failing the schema is.
func checkEditedPayload(s string) error {
	_, err := queue.StorableJSON([]byte(s), "payload", true, queue.CodeInvalidPayload)
	return err
}

// decided answers a decision that took effect (or was replayed).
func (d *Dashboard) decided(c echo.Context, a *queue.Action, notice string) error {
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, "/actions/"+a.ID)
	}
	v, err := d.actionView(c, a)
	if err != nil {
		return err
	}
	v.Notice = notice
	return render(c, http.StatusOK, templates.ActionDetail(v))
}

// decisionFailed re-shows the action with the error: for a decision that
// lost (409) who decided and when; for a bad field the form as it was typed.
func (d *Dashboard) decisionFailed(c echo.Context, id string, err error, form templates.DecisionForm, verb string) error {
	var qe *queue.Error
	if !errors.As(err, &qe) {
		return err
	}
	if qe.Code == queue.CodeNotFound {
		return notFound("action", id)
	}
	a := qe.Action
	if a == nil {
		var gerr error
		if a, gerr = d.getAction(c.Request().Context(), id); gerr != nil {
			return gerr
		}
	}
	v, verr := d.actionView(c, a)
	if verr != nil {
		return verr
	}
	switch {
	case qe.Code == queue.CodeAlreadyDecided:
		v.Error = alreadyDecided(a)
	case a.State != queue.StatePending:
		// Decided meanwhile: whatever was wrong with this form, the answer
		// is who decided it and when (409), as for any late decision.
		v.Error = alreadyDecided(a)
		err = &queue.Error{Code: queue.CodeAlreadyDecided, Action: a, Detail: v.Error}
	default:
		if strings.TrimSpace(form.Payload) == "" {
			form.Payload = queue.EscapeInvisible(v.Payload)
		}
		form.PayloadEdited = !queue.JSONEqual(bytes.TrimSpace([]byte(form.Payload)), a.Payload)
		switch verb {
		case "approve":
			form.ApproveError = qe.Detail
		case "grant":
			form.Grant.Error = qe.Detail
		case "request_changes":
			form.ChangesError = qe.Detail
		default:
			form.RejectError = qe.Detail
		}
		v.Form = form
	}
	comp, perr := d.actionPage(c, v)
	if perr != nil {
		return perr
	}
	return fail(c, err, comp)
}

// alreadyDecided says who decided a no longer pending action, and when.
func alreadyDecided(a *queue.Action) string {
	by := "the system"
	if a.DecidedBy != nil {
		by = *a.DecidedBy
	}
	when := "an unknown time"
	if a.DecidedAt != nil {
		when = templates.FormatTime(*a.DecidedAt)
	}
	return "Nothing was changed: this action was already decided. It is " + string(a.State) + ", decided by " + by + " at " + when + "."
}
