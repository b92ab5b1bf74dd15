package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// Tokens handles GET /admin/tokens.
func (d *Dashboard) Tokens(c echo.Context) error {
	v := templates.TokensView{}
	if c.QueryParam("done") == "revoked" {
		v.Notice = "Token revoked: its next request is refused."
	}
	return d.renderTokens(c, http.StatusOK, v, nil)
}

// renderTokens renders the page, or with err the page as the error's view.
func (d *Dashboard) renderTokens(c echo.Context, status int, v templates.TokensView, err error) error {
	tokens, lerr := d.Accounts.TokenList(c.Request().Context())
	if lerr != nil {
		return lerr
	}
	for _, t := range tokens {
		v.Tokens = append(v.Tokens, templates.TokenRow{Name: t.Name, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt})
	}
	v.CSRF = stringValue(session(c), csrfValue)
	p, perr := d.page(c, "Agent tokens", "tokens")
	if perr != nil {
		return perr
	}
	if err != nil {
		return fail(c, err, templates.TokensPage(p, v))
	}
	return render(c, status, templates.TokensPage(p, v))
}

// CreateToken handles POST /admin/tokens (name). The token is shown in
// this one response and stored only as a hash.
func (d *Dashboard) CreateToken(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	v := templates.TokensView{Name: name}
	if nerr := accounts.ValidateTokenName(name); nerr != nil {
		err := queue.Errorf(queue.CodeInvalidRequest, "%v", nerr)
		v.Error = err.Detail
		return d.renderTokens(c, 0, v, err)
	}
	token, hash := accounts.NewToken()
	now := d.Service.Now()
	_, err := d.Accounts.TokenCreate(c.Request().Context(), accounts.TokenCreateParams{Name: name, Hash: hash, Now: now})
	if errors.Is(err, accounts.ErrExists) {
		err := queue.Errorf(queue.CodeInvalidRequest, "an active token named %s exists; revoke it first or choose another name", name)
		v.Error = err.Detail
		return d.renderTokens(c, 0, v, err)
	}
	if err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventTokenCreated, Subject: queue.TokenSubject(name)}); err != nil {
		return err
	}
	v.Name, v.CreatedName, v.CreatedToken = "", name, token
	return d.renderTokens(c, http.StatusOK, v, nil)
}

// RevokeToken handles POST /admin/tokens/revoke (name).
func (d *Dashboard) RevokeToken(c echo.Context) error {
	name := c.FormValue("name")
	now := d.Service.Now()
	err := d.Accounts.TokenRevoke(c.Request().Context(), accounts.TokenRevokeParams{Name: name, Now: now})
	if errors.Is(err, accounts.ErrNotFound) {
		return queue.Errorf(queue.CodeNotFound, "no active token is named %q", name)
	}
	if err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventTokenRevoked, Subject: queue.TokenSubject(name)}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/tokens?done=revoked")
}
