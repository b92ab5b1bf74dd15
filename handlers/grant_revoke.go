package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// RevokeGrant handles POST /grants/{id}/revoke: the granting user, ops and
// admins revoke a grant, which stops it at once. 303 to /grants; a grant
// revoked already is 409 with the page saying by whom.
func (d *Dashboard) RevokeGrant(c echo.Context) error {
	u := currentUser(c)
	ctx := c.Request().Context()
	g, err := d.Store.GrantGetByID(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if !mayRevoke(u, g) {
		return queue.Errorf(queue.CodeForbidden, "your role (%s) may not revoke a grant another person created: grant %s is %s's; they, ops and admins revoke it",
			u.Role, g.ID, strings.TrimPrefix(g.GrantedBy, "user:"))
	}
	g, err = d.Service.RevokeGrant(ctx, g.ID, actor(u), revokesAny(u))
	var qe *queue.Error
	if err != nil && errors.As(err, &qe) && qe.Code == queue.CodeAlreadyDecided {
		v, verr := d.grantsView(c)
		if verr != nil {
			return verr
		}
		v.Error = "Nothing was changed: " + qe.Detail + "."
		p, perr := d.page(c, "Grants", "grants")
		if perr != nil {
			return perr
		}
		return fail(c, err, templates.GrantsPage(p, v))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/grants#grant-"+g.ID)
}
