// Package accounts holds staff users, agent tokens, dashboard sessions and
// the secrets that protect them. Storage adapters (postgres,
// sqlite) implement Store next to the action tables, so one database
// holds everything.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a staff user may do.
type Role string

const (
	RoleAdmin    Role = "admin"
	RoleApprover Role = "approver"
	RoleOps      Role = "ops"
	RoleViewer   Role = "viewer"
)

// Roles lists every role.
var Roles = []Role{RoleAdmin, RoleApprover, RoleOps, RoleViewer}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q is not one of admin, approver, ops, viewer", s)
}

// CanDecide reports whether the role may approve and reject.
func (r Role) CanDecide() bool { return r == RoleAdmin || r == RoleApprover }

// CanResolve reports whether the role may resolve tickets.
func (r Role) CanResolve() bool { return r == RoleAdmin || r == RoleOps }

// CanAdminister reports whether the role may manage users and tokens.
func (r Role) CanAdminister() bool { return r == RoleAdmin }

// User is a staff member of the dashboard.
type User struct {
	ID                int64
	Email             string
	PasswordHash      string
	Role              Role
	CreatedAt         time.Time
	PasswordChangedAt time.Time
	// SlackID is the user's Slack member id (U123…), "" when unset: how a
	// decision made in Slack is mapped to a staff user.
	SlackID string
	// TelegramID is the user's Telegram user id, 0 when unset: how a
	// decision made in Telegram is mapped to a staff user.
	TelegramID int64
	// SSOSubject is the identity provider's subject (`sub`) of the user's
	// last single sign-on; "" when they never signed in that way.
	SSOSubject string
	// IdPGroups are the identity provider's groups as of IdPSyncedAt (the
	// last single sign-on or recheck): the tools file's "idp:" members are
	// matched against them.
	IdPGroups   []string
	IdPSyncedAt *time.Time
	// SSODeniedAt is when a sign-in attempt (or a recheck) found that the
	// user's groups map to no role; nil otherwise. Until a single sign-on
	// succeeds again (or an admin updates them with `approvals user add
	// --update`) they cannot sign in, and their sessions have ended.
	SSODeniedAt *time.Time
}

// SignsInWith lists how the user can sign in: "SSO" once they did so,
// "password" when they have one.
func (u *User) SignsInWith() []string {
	var out []string
	if u.SSOSubject != "" {
		out = append(out, "SSO")
	}
	if u.PasswordHash != "" {
		out = append(out, "password")
	}
	return out
}

// Token is an agent's bearer token; only its hash is stored.
type Token struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Session is a server-side dashboard session.
type Session struct {
	ID        string
	UserID    int64 // 0 before login (it still carries the CSRF token)
	Data      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Errors.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	// ErrSlackIDTaken refuses a Slack id another user has: one Slack user
	// maps to one staff user.
	ErrSlackIDTaken = errors.New("the Slack id belongs to another user")
	// ErrTelegramIDTaken refuses a Telegram id another user has.
	ErrTelegramIDTaken = errors.New("the Telegram id belongs to another user")
	// ErrStateUsed refuses a single sign-on state that finished a sign-in
	// already.
	ErrStateUsed = errors.New("the sign-in state was used already")
)

// Store persists accounts. Like queue.Store, every method takes the context
// and at most one params struct, and returns one result beside the error.
type Store interface {
	// UserCreate creates u (with u.SlackID unless it is "", u.TelegramID
	// unless it is 0) in one statement: ErrExists for a taken email,
	// ErrSlackIDTaken or ErrTelegramIDTaken for an id another user has, and
	// then nothing is created.
	UserCreate(ctx context.Context, u *User) (*User, error)
	UserSetPassword(ctx context.Context, p UserSetPasswordParams) error // also ends the user's sessions
	// UserSetRole sets the role; one that decides nothing (viewer, ops)
	// ends the user's grants in the same transaction (revoked by system,
	// end reason granter_demoted), so none approves in their name after.
	UserSetRole(ctx context.Context, p UserSetRoleParams) error
	UserGetByEmail(ctx context.Context, email string) (*User, error) // case-insensitive
	UserGetByID(ctx context.Context, id int64) (*User, error)
	UserList(ctx context.Context) ([]*User, error)
	// UserDelete removes the user and ends their sessions and, in the same
	// transaction, their grants (end reason granter_removed, at the wall
	// clock).
	UserDelete(ctx context.Context, id int64) error
	UserCount(ctx context.Context) (int64, error)
	// UserUpdate sets the user's password (ending their sessions), role
	// and, unless p.SlackID is "" (p.TelegramID 0), Slack id (Telegram id),
	// and lifts an SSO denial (an admin says who they are), all or nothing:
	// ErrSlackIDTaken (ErrTelegramIDTaken) when another user has the id,
	// ErrNotFound for no such user, and then nothing changed. A role that
	// decides nothing ends the user's grants in the same transaction.
	UserUpdate(ctx context.Context, p UserUpdateParams) error
	// UserSetSlackID sets (or with "" clears) the user's Slack id;
	// ErrSlackIDTaken when another user has it, ErrNotFound for no such user.
	UserSetSlackID(ctx context.Context, p UserSetSlackIDParams) error
	UserGetBySlackID(ctx context.Context, slackID string) (*User, error) // ErrNotFound
	// UserSetTelegramID sets (or with 0 clears) the user's Telegram id;
	// ErrTelegramIDTaken when another user has it, ErrNotFound for no
	// such user.
	UserSetTelegramID(ctx context.Context, p UserSetTelegramIDParams) error
	UserGetByTelegramID(ctx context.Context, telegramID int64) (*User, error) // ErrNotFound
	// UserSSOSignIn records a single sign-on of p.Email in one statement:
	// it creates the user (without a password) or sets the role, the
	// subject and the IdP groups of the user with that email (in any
	// case), and lifts an SSO denial; a role that decides nothing ends the
	// user's grants in the same transaction.
	UserSSOSignIn(ctx context.Context, p UserSSOSignInParams) (UserSSOSignInResult, error)
	// UserSSODeny records that p.Email's IdP groups map to no role: it
	// stores the groups, sets SSODeniedAt and ends the user's sessions and
	// grants (end reason granter_refused), in one transaction; ErrNotFound (nothing written) when no user has the
	// email.
	UserSSODeny(ctx context.Context, p UserSSODenyParams) (*User, error)
	// SSOStateUse records that the sign-in state with hash p.Hash finished
	// a sign-in: ErrStateUsed when it did so before (a replay). The unique
	// key decides, so of concurrent uses exactly one succeeds.
	SSOStateUse(ctx context.Context, p SSOStateUseParams) error

	TokenCreate(ctx context.Context, p TokenCreateParams) (*Token, error) // ErrExists for an active name
	TokenGetByHash(ctx context.Context, hash string) (*Token, error)      // active tokens only
	TokenRevoke(ctx context.Context, p TokenRevokeParams) error           // ErrNotFound when no active token has the name
	TokenList(ctx context.Context) ([]*Token, error)

	SessionGet(ctx context.Context, p SessionGetParams) (*Session, error) // ErrNotFound when absent or expired
	SessionSave(ctx context.Context, s *Session) error                    // insert or update
	// SessionSetData replaces the data of an existing session, keeping its
	// user and expiry: ErrNotFound when it is gone (a logout meanwhile
	// stays a logout).
	SessionSetData(ctx context.Context, p SessionSetDataParams) error
	SessionDelete(ctx context.Context, id string) error

	LoginFailureAdd(ctx context.Context, p LoginFailureParams) error
	LoginFailureCount(ctx context.Context, p LoginFailureCountParams) (int, error)
	LoginFailureClear(ctx context.Context, subject string) error
	// LoginFailureRemove deletes the attempts of p.Subject recorded at p.At
	// exactly: a login records its attempt before checking the password
	// (so parallel guesses count against each other) and takes it back
	// when the password was right.
	LoginFailureRemove(ctx context.Context, p LoginFailureParams) error
	// AccountsPrune deletes sessions and used sign-in states expired at
	// p.Now and login failures older than p.FailuresBefore, so no table
	// grows without bound.
	AccountsPrune(ctx context.Context, p AccountsPruneParams) error

	SettingGet(ctx context.Context, key string) (string, error) // ErrNotFound
	// SettingInit stores p.Value under p.Key unless the key exists, and
	// returns the stored value: concurrent starters agree on one secret.
	SettingInit(ctx context.Context, p SettingParams) (string, error)
	// SettingTake deletes p.Key if it holds p.Value and reports whether
	// this call deleted it: of concurrent callers exactly one takes a
	// one-time token.
	SettingTake(ctx context.Context, p SettingParams) (bool, error)
}

// UserSetPasswordParams set one user's password hash.
type UserSetPasswordParams struct {
	ID           int64
	PasswordHash string
	Now          time.Time // the new PasswordChangedAt
}

// UserSetRoleParams set one user's role.
type UserSetRoleParams struct {
	ID   int64
	Role Role
	// Now is when a role that decides nothing ends the user's grants; the
	// zero time: the wall clock.
	Now time.Time
}

// At is p.Now, or the wall clock when it is the zero time.
func (p UserSetRoleParams) At() time.Time {
	if p.Now.IsZero() {
		return time.Now()
	}
	return p.Now
}

// UserUpdateParams replace a user's password, role and (unless "") Slack id
// and (unless 0) Telegram id.
type UserUpdateParams struct {
	ID           int64
	PasswordHash string
	Role         Role
	SlackID      string
	TelegramID   int64
	Now          time.Time
}

// UserSetTelegramIDParams set or (with 0) clear one user's Telegram id.
type UserSetTelegramIDParams struct {
	ID         int64
	TelegramID int64
}

// UserSetSlackIDParams set or clear one user's Slack id.
type UserSetSlackIDParams struct {
	ID      int64
	SlackID string
}

// UserSSOSignInParams are one successful single sign-on.
type UserSSOSignInParams struct {
	Email     string // verified by the identity provider
	Subject   string // the provider's sub
	Role      Role   // mapped from IdPGroups
	IdPGroups []string
	Now       time.Time
}

// UserSSOSignInResult is the user as stored, and whether this sign-in
// created them.
type UserSSOSignInResult struct {
	User    *User
	Created bool
}

// UserSSODenyParams are one sign-in attempt (or recheck) whose groups map
// to no role.
type UserSSODenyParams struct {
	Email     string
	Subject   string
	IdPGroups []string
	Now       time.Time
}

// SSOStateUseParams name a sign-in state by its hash; the record is kept
// until ExpiresAt, past which the state's cookie is refused anyway.
type SSOStateUseParams struct {
	Hash      string
	ExpiresAt time.Time
}

// TokenCreateParams create an agent token; only its hash is stored.
type TokenCreateParams struct {
	Name, Hash string
	Now        time.Time
}

// TokenRevokeParams revoke the active token of a name.
type TokenRevokeParams struct {
	Name string
	Now  time.Time
}

// SessionGetParams read a session that has not expired at Now.
type SessionGetParams struct {
	ID  string
	Now time.Time
}

// SessionSetDataParams replace one session's data.
type SessionSetDataParams struct {
	ID   string // the hash of the session id, as stored
	Data string
}

// LoginFailureParams are one failed login attempt of a subject.
type LoginFailureParams struct {
	Subject string
	At      time.Time
}

// LoginFailureCountParams count a subject's failures since a time.
type LoginFailureCountParams struct {
	Subject string
	Since   time.Time
}

// AccountsPruneParams say what is old enough to delete.
type AccountsPruneParams struct {
	Now            time.Time // sessions expired at Now
	FailuresBefore time.Time // login failures older than this
}

// SettingParams are one setting's key and value.
type SettingParams struct {
	Key, Value string
}

// IdPGroupsJSON encodes a user's IdP groups as the stores keep them: a JSON
// array, [] for none.
func IdPGroupsJSON(groups []string) string {
	if len(groups) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(groups)
	return string(b)
}

// NewToken returns a new random agent token and the hash to store.
func NewToken() (token, hash string) {
	token = "apv_" + RandomString(32)
	return token, HashToken(token)
}

// HashToken hashes a bearer token for lookup. Tokens carry 256 random bits,
// so a fast hash is enough; a slow one would only cost every request.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// RandomString returns n random bytes, URL-safe base64 encoded.
func RandomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashPassword hashes a staff password with bcrypt.
func HashPassword(password string) (string, error) {
	if len(password) < 8 {
		return "", errors.New("password must be at least 8 characters")
	}
	if len(password) > 72 {
		return "", errors.New("password must be at most 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword reports whether password matches hash.
func CheckPassword(hash, password string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// ValidateTokenName checks an agent token's name, which agents and staff
// read as "agent:NAME" in requested_by, logs and timelines: 1-64 letters,
// digits, '.', '_' or '-'.
func ValidateTokenName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("token name %q: use 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("token name %q: use only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// NormalizeEmail trims and lower-cases an email and checks its shape.
func NormalizeEmail(email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	if len(e) > 254 {
		return "", fmt.Errorf("email has %d characters; an address has at most 254", len(e))
	}
	at := strings.IndexByte(e, '@')
	if at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\r\n<>\"") || len(e) > 254 {
		return "", fmt.Errorf("email %q is not a valid address", email)
	}
	return e, nil
}

// ParseTelegramID reads a Telegram user id (a positive number, as the bot
// sees it in every update's from.id); "" is 0, none.
func ParseTelegramID(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("telegram id %q is not a Telegram user id, a positive number such as 123456789 (pressing a button of an approvals message in Telegram tells you yours)", s)
	}
	return id, nil
}

// ValidateSlackID checks a Slack member id (U0123ABCD, or W… in an
// Enterprise Grid); "" is valid and means none.
func ValidateSlackID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) < 3 || len(id) > 32 || (id[0] != 'U' && id[0] != 'W') {
		return fmt.Errorf("slack id %q is not a Slack member id such as U0123ABCD (Slack: profile, ⋮, Copy member ID)", id)
	}
	for _, r := range id {
		if !('A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return fmt.Errorf("slack id %q is not a Slack member id such as U0123ABCD: capital letters and digits only", id)
		}
	}
	return nil
}
