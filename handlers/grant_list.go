package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// grantActionsShown caps the actions listed under each grant.
const grantActionsShown = 20

// GrantList handles GET /grants (all staff): active grants, then past ones,
// each with the actions it approved.
func (d *Dashboard) GrantList(c echo.Context) error {
	v, err := d.grantsView(c)
	if err != nil {
		return err
	}
	p, err := d.page(c, "Grants", "grants")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.GrantsPage(p, v))
}

func (d *Dashboard) grantsView(c echo.Context) (templates.GrantsView, error) {
	ctx := c.Request().Context()
	now := d.Service.Now()
	v := templates.GrantsView{Now: now, CSRF: stringValue(session(c), csrfValue)}
	u := currentUser(c)
	for _, active := range []bool{true, false} {
		list, err := d.Store.GrantList(ctx, queue.GrantListParams{Active: &active, Now: now, Limit: 200})
		if err != nil {
			return v, err
		}
		for _, g := range list {
			actions, err := d.Store.ActionList(ctx, queue.ActionListParams{GrantID: g.ID, Limit: grantActionsShown})
			if err != nil {
				return v, err
			}
			row := templates.GrantRow{Grant: g, Actions: actions, CanRevoke: mayRevoke(u, g)}
			if active {
				if row.Stopped, err = d.granterStanding(ctx, g); err != nil {
					return v, err
				}
				v.Active = append(v.Active, row)
			} else {
				v.Past = append(v.Past, row)
			}
		}
	}
	return v, nil
}

// granterStanding is why the active grant g approves nothing now, "" when
// it approves: queue.GranterStanding of its granting user under the tool's
// approval rule in the tools file now in force, as a submission judges it.
func (d *Dashboard) granterStanding(ctx context.Context, g *queue.Grant) (string, error) {
	var who queue.Granter
	if email := g.GranterEmail(); email != "" {
		u, err := d.Accounts.UserGetByEmail(ctx, email)
		switch {
		case err == nil:
			who = queue.Granter{Exists: true, CanDecide: u.Role.CanDecide(), NoAccess: u.SSODeniedAt != nil,
				Email: u.Email, IdPGroups: u.IdPGroups}
		case !errors.Is(err, accounts.ErrNotFound):
			return "", err
		}
	}
	tool, _ := d.Service.Registry().Lookup(g.Tool)
	return queue.GranterStanding(tool.Approval, who), nil
}

// mayRevoke reports whether u may revoke g: its granting user, operators
// and admins.
func mayRevoke(u *accounts.User, g *queue.Grant) bool {
	return u != nil && (revokesAny(u) || actor(u) == g.GrantedBy)
}

func revokesAny(u *accounts.User) bool { return u.Role.CanResolve() || u.Role.CanAdminister() }
