package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// userNotices are the confirmations a redirect may ask the users page to
// show; only these fixed texts, so nothing from the URL is reflected.
var userNotices = map[string]string{
	"created":  "User added.",
	"role":     "Role changed; it applies to the user's next request.",
	"removed":  "User removed; their sessions have ended.",
	"password": "Password changed; the user's sessions have ended.",
	"slack":    "Slack id saved.",
	"telegram": "Telegram id saved.",
}

// Users handles GET /admin/users.
func (d *Dashboard) Users(c echo.Context) error {
	v, err := d.usersView(c, templates.UserForm{})
	if err != nil {
		return err
	}
	v.Notice = userNotices[c.QueryParam("done")]
	return d.renderUsers(c, v, nil)
}

func (d *Dashboard) usersView(c echo.Context, form templates.UserForm) (templates.UsersView, error) {
	users, err := d.Accounts.UserList(c.Request().Context())
	if err != nil {
		return templates.UsersView{}, err
	}
	v := templates.UsersView{Self: currentUser(c).ID, Form: form, CSRF: stringValue(session(c), csrfValue)}
	for _, r := range accounts.Roles {
		v.Roles = append(v.Roles, string(r))
	}
	for _, u := range users {
		v.Users = append(v.Users, templates.UserRow{ID: u.ID, Email: u.Email, Role: string(u.Role), SlackID: u.SlackID, TelegramID: u.TelegramID, CreatedAt: u.CreatedAt,
			SignIn: strings.Join(u.SignsInWith(), ", "), IdPGroups: u.IdPGroups, IdPSyncedAt: u.IdPSyncedAt, SSODenied: u.SSODeniedAt != nil})
	}
	return v, nil
}

// renderUsers renders the page, or with err the page as the error's view.
func (d *Dashboard) renderUsers(c echo.Context, v templates.UsersView, err error) error {
	p, perr := d.page(c, "Users", "users")
	if perr != nil {
		return perr
	}
	if err != nil {
		return fail(c, err, templates.UsersPage(p, v))
	}
	return render(c, http.StatusOK, templates.UsersPage(p, v))
}

// usersFailed re-shows the users page with err next to the form (row 0) or
// the user's row.
func (d *Dashboard) usersFailed(c echo.Context, err error, form templates.UserForm, rowID int64) error {
	var qe *queue.Error
	if !errors.As(err, &qe) {
		return err
	}
	if rowID != 0 {
		form.RowID, form.RowError = rowID, qe.Detail
	} else {
		form.Error = qe.Detail
	}
	v, verr := d.usersView(c, form)
	if verr != nil {
		return verr
	}
	return d.renderUsers(c, v, err)
}

// CreateUser handles POST /admin/users (email, role, password).
func (d *Dashboard) CreateUser(c echo.Context) error {
	form := templates.UserForm{Email: strings.TrimSpace(c.FormValue("email")), Role: c.FormValue("role")}
	email, err := accounts.NormalizeEmail(form.Email)
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), form, 0)
	}
	role, err := accounts.ParseRole(form.Role)
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), form, 0)
	}
	hash, err := accounts.HashPassword(c.FormValue("password"))
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), form, 0)
	}
	now := d.Service.Now()
	_, err = d.Accounts.UserCreate(c.Request().Context(), &accounts.User{Email: email, PasswordHash: hash, Role: role,
		CreatedAt: now, PasswordChangedAt: now})
	if errors.Is(err, accounts.ErrExists) {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%s already has an account", email), form, 0)
	}
	if err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventUserAdded, Subject: queue.UserSubject(email),
		Data: map[string]any{"role": string(role)}}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=created")
}

// targetUser reads the user named by the path.
func (d *Dashboard) targetUser(c echo.Context) (*accounts.User, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return nil, notFound("user", c.Param("id"))
	}
	u, err := d.userGet(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (d *Dashboard) userGet(ctx context.Context, id int64) (*accounts.User, error) {
	u, err := d.Accounts.UserGetByID(ctx, id)
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, notFound("user", strconv.FormatInt(id, 10))
	}
	return u, err
}

// notSelf refuses an action on the admin's own account, so that an admin
// cannot demote or remove themself and leave nobody to administer.
func notSelf(c echo.Context, u *accounts.User, what string) error {
	if u.ID == currentUser(c).ID {
		return queue.Errorf(queue.CodeInvalidRequest, "you cannot %s your own account; ask another admin", what)
	}
	return nil
}

// ChangeUserRole handles POST /admin/users/{id}/role (role).
func (d *Dashboard) ChangeUserRole(c echo.Context) error {
	u, err := d.targetUser(c)
	if err != nil {
		return err
	}
	if err := notSelf(c, u, "change the role of"); err != nil {
		return d.usersFailed(c, err, templates.UserForm{}, u.ID)
	}
	role, err := accounts.ParseRole(c.FormValue("role"))
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), templates.UserForm{}, u.ID)
	}
	if err := d.Accounts.UserSetRole(c.Request().Context(), accounts.UserSetRoleParams{ID: u.ID, Role: role, Now: d.Service.Now()}); err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventRoleChanged, Subject: queue.UserSubject(u.Email),
		Data: map[string]any{"from": string(u.Role), "to": string(role)}}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=role")
}

// RemoveUser handles POST /admin/users/{id}/remove; the user's sessions go
// with the user.
func (d *Dashboard) RemoveUser(c echo.Context) error {
	u, err := d.targetUser(c)
	if err != nil {
		return err
	}
	if err := notSelf(c, u, "remove"); err != nil {
		return d.usersFailed(c, err, templates.UserForm{}, u.ID)
	}
	err = d.Accounts.UserDelete(c.Request().Context(), u.ID)
	switch {
	case errors.Is(err, accounts.ErrNotFound):
		// Removed a moment ago, by whoever recorded it.
	case err != nil:
		return err
	default:
		if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventUserRemoved, Subject: queue.UserSubject(u.Email),
			Data: map[string]any{"role": string(u.Role)}}); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=removed")
}

// SetUserPassword handles POST /admin/users/{id}/password (password); the
// user's sessions end.
func (d *Dashboard) SetUserPassword(c echo.Context) error {
	u, err := d.targetUser(c)
	if err != nil {
		return err
	}
	hash, err := accounts.HashPassword(c.FormValue("password"))
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), templates.UserForm{}, u.ID)
	}
	now := d.Service.Now()
	if err := d.Accounts.UserSetPassword(c.Request().Context(), accounts.UserSetPasswordParams{ID: u.ID, PasswordHash: hash, Now: now}); err != nil {
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventPasswordChanged, Subject: queue.UserSubject(u.Email)}); err != nil {
		return err
	}
	if u.ID == currentUser(c).ID {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=password")
}

// SetUserSlackID handles POST /admin/users/{id}/slack (slack_id; empty
// clears it): the Slack member id that maps a decision made in Slack to
// this user. One id belongs to one user at most.
func (d *Dashboard) SetUserSlackID(c echo.Context) error {
	u, err := d.targetUser(c)
	if err != nil {
		return err
	}
	id := strings.TrimSpace(c.FormValue("slack_id"))
	if err := accounts.ValidateSlackID(id); err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), templates.UserForm{}, u.ID)
	}
	err = d.Accounts.UserSetSlackID(c.Request().Context(), accounts.UserSetSlackIDParams{ID: u.ID, SlackID: id})
	switch {
	case errors.Is(err, accounts.ErrSlackIDTaken):
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "Slack id %s belongs to another user already", id), templates.UserForm{}, u.ID)
	case errors.Is(err, accounts.ErrNotFound):
		return notFound("user", strconv.FormatInt(u.ID, 10))
	case err != nil:
		return err
	}
	if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventSlackIDChanged, Subject: queue.UserSubject(u.Email),
		Data: map[string]any{"from": u.SlackID, "to": id}}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=slack")
}

// SetUserTelegramID handles POST /admin/users/{id}/telegram (telegram_id;
// empty clears it): the Telegram user id that maps a decision made in
// Telegram to this user. One id belongs to one user at most.
func (d *Dashboard) SetUserTelegramID(c echo.Context) error {
	u, err := d.targetUser(c)
	if err != nil {
		return err
	}
	id, err := accounts.ParseTelegramID(c.FormValue("telegram_id"))
	if err != nil {
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "%v", err), templates.UserForm{}, u.ID)
	}
	err = d.Accounts.UserSetTelegramID(c.Request().Context(), accounts.UserSetTelegramIDParams{ID: u.ID, TelegramID: id})
	switch {
	case errors.Is(err, accounts.ErrTelegramIDTaken):
		return d.usersFailed(c, queue.Errorf(queue.CodeInvalidRequest, "Telegram id %d belongs to another user already", id), templates.UserForm{}, u.ID)
	case errors.Is(err, accounts.ErrNotFound):
		return notFound("user", strconv.FormatInt(u.ID, 10))
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?done=telegram")
}
