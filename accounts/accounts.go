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
	"errors"
	"fmt"
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
)

// Store persists accounts. Like queue.Store, every method takes the context
// and at most one params struct, and returns one result beside the error.
type Store interface {
	// UserCreate creates u (with u.SlackID unless it is "") in one
	// statement: ErrExists for a taken email, ErrSlackIDTaken for a Slack
	// id another user has, and then nothing is created.
	UserCreate(ctx context.Context, u *User) (*User, error)
	UserSetPassword(ctx context.Context, p UserSetPasswordParams) error // also ends the user's sessions
	UserSetRole(ctx context.Context, p UserSetRoleParams) error
	UserGetByEmail(ctx context.Context, email string) (*User, error) // case-insensitive
	UserGetByID(ctx context.Context, id int64) (*User, error)
	UserList(ctx context.Context) ([]*User, error)
	UserDelete(ctx context.Context, id int64) error // also ends the user's sessions
	UserCount(ctx context.Context) (int64, error)
	// UserUpdate sets the user's password (ending their sessions), role
	// and, unless p.SlackID is "", Slack id, all or nothing:
	// ErrSlackIDTaken when another user has the id, ErrNotFound for no such
	// user, and then nothing changed.
	UserUpdate(ctx context.Context, p UserUpdateParams) error
	// UserSetSlackID sets (or with "" clears) the user's Slack id;
	// ErrSlackIDTaken when another user has it, ErrNotFound for no such user.
	UserSetSlackID(ctx context.Context, p UserSetSlackIDParams) error
	UserGetBySlackID(ctx context.Context, slackID string) (*User, error) // ErrNotFound

	TokenCreate(ctx context.Context, p TokenCreateParams) (*Token, error) // ErrExists for an active name
	TokenGetByHash(ctx context.Context, hash string) (*Token, error)      // active tokens only
	TokenRevoke(ctx context.Context, p TokenRevokeParams) error           // ErrNotFound when no active token has the name
	TokenList(ctx context.Context) ([]*Token, error)

	SessionGet(ctx context.Context, p SessionGetParams) (*Session, error) // ErrNotFound when absent or expired
	SessionSave(ctx context.Context, s *Session) error                    // insert or update
	SessionDelete(ctx context.Context, id string) error

	LoginFailureAdd(ctx context.Context, p LoginFailureParams) error
	LoginFailureCount(ctx context.Context, p LoginFailureCountParams) (int, error)
	LoginFailureClear(ctx context.Context, subject string) error
	// LoginFailureRemove deletes the attempts of p.Subject recorded at p.At
	// exactly: a login records its attempt before checking the password
	// (so parallel guesses count against each other) and takes it back
	// when the password was right.
	LoginFailureRemove(ctx context.Context, p LoginFailureParams) error
	// AccountsPrune deletes sessions expired at p.Now and login failures
	// older than p.FailuresBefore, so neither table grows without bound.
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
}

// UserUpdateParams replace a user's password, role and (unless "") Slack id.
type UserUpdateParams struct {
	ID           int64
	PasswordHash string
	Role         Role
	SlackID      string
	Now          time.Time
}

// UserSetSlackIDParams set or clear one user's Slack id.
type UserSetSlackIDParams struct {
	ID      int64
	SlackID string
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
