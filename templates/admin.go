package templates

import (
	"strconv"
	"time"
)

// UsersView is the staff administration page.
type UsersView struct {
	Users  []UserRow
	Roles  []string
	Self   int64
	Form   UserForm
	Notice string
	CSRF   string
}

// UserRow is one staff user.
type UserRow struct {
	ID      int64
	Email   string
	Role    string
	SlackID string
	// TelegramID is 0 when unset.
	TelegramID int64
	CreatedAt  time.Time
	// SignIn says how they sign in: "SSO", "password" or both.
	SignIn string
	// IdPGroups are the identity provider's groups as of IdPSyncedAt (the
	// last single sign-on or recheck); SSODenied says those groups gave
	// no role.
	IdPGroups   []string
	IdPSyncedAt *time.Time
	SSODenied   bool
}

// telegramID shows a Telegram id, or nothing when unset.
func telegramID(id int64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}

// UserForm keeps what was typed when creating a user fails.
type UserForm struct {
	Email string
	Role  string
	Error string
	// RowError is an error about the user with id RowID (role, removal).
	RowID    int64
	RowError string
}

// TokensView is the agent token administration page.
type TokensView struct {
	Tokens []TokenRow
	// Created is the token just created: shown once, never again.
	CreatedName  string
	CreatedToken string
	Name         string
	Error        string
	Notice       string
	CSRF         string
}

// TokenRow is one agent token (never its value).
type TokenRow struct {
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

func userURL(id int64, what string) string {
	return "/admin/users/" + strconv.FormatInt(id, 10) + "/" + what
}

func rowID(what string, id int64) string { return what + "-" + strconv.FormatInt(id, 10) }
