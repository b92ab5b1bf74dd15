package handlers

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// SetupTokenSetting is the settings key of the one-time setup token.
const SetupTokenSetting = "setup_token"

// SetupToken returns the token of the one-time setup link, creating it
// once (every process agrees on it), or "" when an admin exists. Users of
// other roles do not end it: only an admin can add the others, so until
// one exists the link is the way in.
func SetupToken(ctx context.Context, store accounts.Store) (string, error) {
	if has, err := adminExists(ctx, store); err != nil || has {
		return "", err
	}
	return store.SettingInit(ctx, accounts.SettingParams{Key: SetupTokenSetting, Value: accounts.RandomString(32)})
}

// adminExists reports whether any staff user is an admin. Staff are few,
// so listing them is cheap, and it runs only on the setup paths.
func adminExists(ctx context.Context, store accounts.Store) (bool, error) {
	users, err := store.UserList(ctx)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		if u.Role == accounts.RoleAdmin {
			return true, nil
		}
	}
	return false, nil
}

// setupAllowed reports whether token opens the setup form: it matches the
// stored token and no admin exists yet. A refusal says which it is.
func (d *Dashboard) setupAllowed(ctx context.Context, token string) error {
	has, err := adminExists(ctx, d.Accounts)
	if err != nil {
		return err
	}
	if has {
		return queue.Errorf(queue.CodeNotFound, "this setup link is no longer valid: an admin exists already; sign in, or ask an admin for an account")
	}
	refused := queue.Errorf(queue.CodeNotFound, "this setup link is not valid; the server prints the current one when it starts")
	if token == "" {
		return refused
	}
	want, err := d.Accounts.SettingGet(ctx, SetupTokenSetting)
	if errors.Is(err, accounts.ErrNotFound) {
		return refused
	}
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return refused
	}
	return nil
}

// SetupPage handles GET /setup?token=T.
func (d *Dashboard) SetupPage(c echo.Context) error {
	token := c.QueryParam("token")
	if err := d.setupAllowed(c.Request().Context(), token); err != nil {
		return err
	}
	return d.renderSetup(c, http.StatusOK, templates.SetupView{Token: token})
}

func (d *Dashboard) renderSetup(c echo.Context, status int, v templates.SetupView) error {
	p, err := d.page(c, "Set up", "")
	if err != nil {
		return err
	}
	return render(c, status, templates.SetupPage(p, v))
}

// Setup handles POST /setup (token, email, password): it creates the first
// admin and signs them in.
func (d *Dashboard) Setup(c echo.Context) error {
	ctx := c.Request().Context()
	token := c.FormValue("token")
	if err := d.setupAllowed(ctx, token); err != nil {
		return err
	}
	v := templates.SetupView{Token: token, Email: strings.TrimSpace(c.FormValue("email"))}
	email, err := accounts.NormalizeEmail(v.Email)
	if err != nil {
		v.Error = err.Error()
		return d.renderSetup(c, http.StatusUnprocessableEntity, v)
	}
	hash, err := accounts.HashPassword(c.FormValue("password"))
	if err != nil {
		v.Error = err.Error()
		return d.renderSetup(c, http.StatusUnprocessableEntity, v)
	}
	taken := func() error {
		v.Error = email + " already has an account: use another email for the admin"
		return d.renderSetup(c, http.StatusUnprocessableEntity, v)
	}
	if _, err := d.Accounts.UserGetByEmail(ctx, email); err == nil {
		return taken()
	} else if !errors.Is(err, accounts.ErrNotFound) {
		return err
	}
	// Of two people using the link at once, exactly one takes it.
	took, err := d.Accounts.SettingTake(ctx, accounts.SettingParams{Key: SetupTokenSetting, Value: token})
	if err != nil {
		return err
	}
	if !took {
		return queue.Errorf(queue.CodeNotFound, "this setup link was used a moment ago: sign in instead")
	}
	now := d.Service.Now()
	u, err := d.Accounts.UserCreate(ctx, &accounts.User{Email: email, PasswordHash: hash, Role: accounts.RoleAdmin,
		CreatedAt: now, PasswordChangedAt: now})
	if errors.Is(err, accounts.ErrExists) {
		// Created a moment ago by someone else: the link was not used,
		// so it is put back for another try.
		if _, err := d.Accounts.SettingInit(ctx, accounts.SettingParams{Key: SetupTokenSetting, Value: token}); err != nil {
			return err
		}
		return taken()
	}
	if err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventUserAdded, Actor: actor(u), Subject: queue.UserSubject(u.Email),
		Channel: "setup", Data: map[string]any{"role": string(u.Role)}}); err != nil {
		return err
	}
	if err := d.signIn(c, u, nil); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/")
}
