package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

const userColumns = `id, email, password_hash, role, created_at, password_changed_at, coalesce(slack_id, ''), coalesce(telegram_id, 0),
	coalesce(sso_subject, ''), idp_groups, idp_synced_at, sso_denied_at`

func scanUser(sc scanner) (*accounts.User, error) {
	var (
		u                  accounts.User
		role               string
		created, pwChanged string
		groups             string
		synced, denied     sql.NullString
	)
	if err := sc.Scan(&u.ID, &u.Email, &u.PasswordHash, &role, &created, &pwChanged, &u.SlackID, &u.TelegramID,
		&u.SSOSubject, &groups, &synced, &denied); err != nil {
		return nil, err
	}
	u.Role = accounts.Role(role)
	var err error
	if u.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if u.PasswordChangedAt, err = parseTime(pwChanged); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(groups), &u.IdPGroups); err != nil {
		return nil, fmt.Errorf("user %d: idp_groups: %w", u.ID, err)
	}
	if u.IdPSyncedAt, err = parseNullTime(synced); err != nil {
		return nil, err
	}
	if u.SSODeniedAt, err = parseNullTime(denied); err != nil {
		return nil, err
	}
	return &u, nil
}

// UserSSOSignIn implements accounts.Store. The single writer serialises
// the read and the write of the transaction, so concurrent first sign-ins
// of one person create one user.
func (s *Store) UserSSOSignIn(ctx context.Context, p accounts.UserSSOSignInParams) (accounts.UserSSOSignInResult, error) {
	var res accounts.UserSSOSignInResult
	now := fmtTime(p.Now)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var one int
		switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE lower(email) = lower(?)`, p.Email).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			res.Created = true
		case err != nil:
			return err
		default:
			res.Created = false
		}
		u, err := scanUser(tx.QueryRowContext(ctx, `INSERT INTO users (email, password_hash, role, created_at, password_changed_at,
			sso_subject, idp_groups, idp_synced_at) VALUES (?, '', ?, ?, ?, ?, ?, ?)
		ON CONFLICT (lower(email)) DO UPDATE SET role = excluded.role, sso_subject = excluded.sso_subject,
			idp_groups = excluded.idp_groups, idp_synced_at = excluded.idp_synced_at, sso_denied_at = NULL
		RETURNING `+userColumns, p.Email, string(p.Role), now, now, p.Subject, accounts.IdPGroupsJSON(p.IdPGroups), now))
		res.User = u
		if err != nil || res.Created || p.Role.CanDecide() {
			return err
		}
		// The provider's groups now give a role that decides nothing.
		return endGrantsOfUser(ctx, tx, u.ID, queue.GrantEndGranterDemoted, p.Now)
	})
	if err != nil {
		return accounts.UserSSOSignInResult{}, fmt.Errorf("single sign-on of %s: %w", p.Email, err)
	}
	return res, nil
}

// UserSSODeny implements accounts.Store.
func (s *Store) UserSSODeny(ctx context.Context, p accounts.UserSSODenyParams) (*accounts.User, error) {
	var u *accounts.User
	now := fmtTime(p.Now)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, `UPDATE users SET sso_subject = ?, idp_groups = ?, idp_synced_at = ?, sso_denied_at = ?
		WHERE lower(email) = lower(?) RETURNING `+userColumns, p.Subject, accounts.IdPGroupsJSON(p.IdPGroups), now, now, p.Email))
		if errors.Is(err, sql.ErrNoRows) {
			return accounts.ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, u.ID); err != nil {
			return err
		}
		return endGrantsOfUser(ctx, tx, u.ID, queue.GrantEndGranterRefused, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("deny single sign-on of %s: %w", p.Email, err)
	}
	return u, nil
}

// SSOStateUse implements accounts.Store: the primary key of sso_states
// lets one use of a state in.
func (s *Store) SSOStateUse(ctx context.Context, p accounts.SSOStateUseParams) error {
	n, err := s.exec(ctx, `INSERT INTO sso_states (state_hash, expires_at) VALUES (?, ?) ON CONFLICT (state_hash) DO NOTHING`,
		p.Hash, fmtTime(p.ExpiresAt))
	if err != nil {
		return fmt.Errorf("use sign-in state: %w", err)
	}
	if n == 0 {
		return accounts.ErrStateUsed
	}
	return nil
}

func (s *Store) userWhere(ctx context.Context, what any, where string, arg any) (*accounts.User, error) {
	u, err := scanUser(s.read.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %v: %w", what, accounts.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get user %v: %w", what, err)
	}
	return u, nil
}

// UserCreate inserts u in one statement; a taken email (in any case) is
// ErrExists, a Slack id another user has ErrSlackIDTaken (the unique index
// users_slack_id), and either refuses the whole row. A taken email wins
// when both are: SQLite checks users_slack_id first and names only it, so
// on a Slack id violation the call looks the email up (lower(email), as
// the index users_email does) in the same transaction. PostgreSQL answers
// ErrExists there, and `user add --update` relies on it for a user who
// already has that Slack id.
func (s *Store) UserCreate(ctx context.Context, u *accounts.User) (*accounts.User, error) {
	created := u.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	changed := u.PasswordChangedAt
	if changed.IsZero() {
		changed = created
	}
	var (
		nu         *accounts.User
		emailTaken bool
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		emailTaken = false
		nu, err = scanUser(tx.QueryRowContext(ctx, `INSERT INTO users (email, password_hash, role, created_at, password_changed_at, slack_id, telegram_id)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+userColumns, u.Email, u.PasswordHash, string(u.Role), fmtTime(created), fmtTime(changed),
			slackIDArg(u.SlackID), telegramIDArg(u.TelegramID)))
		if isUniqueViolation(err) && (isSlackIDViolation(err) || isTelegramIDViolation(err)) {
			var one int
			switch qerr := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE lower(email) = lower(?)`, u.Email).Scan(&one); {
			case qerr == nil:
				emailTaken = true
			case !errors.Is(qerr, sql.ErrNoRows):
				return qerr
			}
		}
		return err
	})
	if isUniqueViolation(err) && emailTaken {
		return nil, fmt.Errorf("user %s: %w", u.Email, accounts.ErrExists)
	}
	if isUniqueViolation(err) && isSlackIDViolation(err) {
		return nil, fmt.Errorf("user %s: slack id %s: %w", u.Email, u.SlackID, accounts.ErrSlackIDTaken)
	}
	if isUniqueViolation(err) && isTelegramIDViolation(err) {
		return nil, fmt.Errorf("user %s: telegram id %d: %w", u.Email, u.TelegramID, accounts.ErrTelegramIDTaken)
	}
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("user %s: %w", u.Email, accounts.ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", u.Email, err)
	}
	return nu, nil
}

// UserSetPassword changes the password hash and ends the user's sessions.
func (s *Store) UserSetPassword(ctx context.Context, p accounts.UserSetPasswordParams) error {
	id, hash, now := p.ID, p.PasswordHash, p.Now
	if err := s.updateUserEndingSessions(ctx, id, "", now, `password_hash = ?, password_changed_at = ?`, hash, fmtTime(now)); err != nil {
		return fmt.Errorf("set password of user %d: %w", id, err)
	}
	return nil
}

// UserUpdate sets password, role and (unless "") Slack id in one
// transaction, and ends the user's sessions; a taken Slack id changes
// nothing.
func (s *Store) UserUpdate(ctx context.Context, p accounts.UserUpdateParams) error {
	id, hash, role, slackID, now := p.ID, p.PasswordHash, p.Role, p.SlackID, p.Now
	// A role that decides nothing ends the user's grants with the update.
	grantsEnd := ""
	if !role.CanDecide() {
		grantsEnd = queue.GrantEndGranterDemoted
	}
	err := s.updateUserEndingSessions(ctx, id, grantsEnd, now, `password_hash = ?, password_changed_at = ?, role = ?,
    slack_id = coalesce(?, slack_id), telegram_id = coalesce(?, telegram_id), sso_denied_at = NULL`, hash, fmtTime(now), string(role),
		slackIDArg(slackID), telegramIDArg(p.TelegramID))
	if errors.Is(err, accounts.ErrSlackIDTaken) {
		return fmt.Errorf("update user %d: slack id %s: %w", id, slackID, err)
	}
	if errors.Is(err, accounts.ErrTelegramIDTaken) {
		return fmt.Errorf("update user %d: telegram id %d: %w", id, p.TelegramID, err)
	}
	if err != nil {
		return fmt.Errorf("update user %d: %w", id, err)
	}
	return nil
}

// updateUserEndingSessions runs UPDATE users SET set WHERE id = ? (set's
// parameters first) and ends the user's sessions, and with a grantsEnd
// reason their grants (at now), in one transaction: ErrNotFound for no
// such user, ErrSlackIDTaken when the new Slack id is another user's (the
// only unique column set changes).
func (s *Store) updateUserEndingSessions(ctx context.Context, id int64, grantsEnd string, now time.Time, set string, args ...any) error {
	return s.withTx(ctx, func(ctx context.Context, tx querier) error {
		n, err := rowsAffected(tx.ExecContext(ctx, `UPDATE users SET `+set+` WHERE id = ?`, append(args, id)...))
		if isUniqueViolation(err) && isTelegramIDViolation(err) {
			return accounts.ErrTelegramIDTaken
		}
		if isUniqueViolation(err) {
			return accounts.ErrSlackIDTaken
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return accounts.ErrNotFound
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, id); err != nil || grantsEnd == "" {
			return err
		}
		return endGrantsOfUser(ctx, tx, id, grantsEnd, now)
	})
}

// UserSetRole changes a user's role; one that decides nothing ends the
// user's grants in the same transaction.
func (s *Store) UserSetRole(ctx context.Context, p accounts.UserSetRoleParams) error {
	id, role := p.ID, p.Role
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		n, err := rowsAffected(tx.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, string(role), id))
		if err == nil && n == 0 {
			err = accounts.ErrNotFound
		}
		if err != nil || role.CanDecide() {
			return err
		}
		return endGrantsOfUser(ctx, tx, id, queue.GrantEndGranterDemoted, p.At())
	})
	if err != nil {
		return fmt.Errorf("set role of user %d: %w", id, err)
	}
	return nil
}

// UserSetSlackID sets or clears the user's Slack id; the partial unique
// index users_slack_id keeps one user per id.
func (s *Store) UserSetSlackID(ctx context.Context, p accounts.UserSetSlackIDParams) error {
	id, slackID := p.ID, p.SlackID
	n, err := s.exec(ctx, `UPDATE users SET slack_id = ? WHERE id = ?`, slackIDArg(slackID), id)
	if isUniqueViolation(err) {
		return fmt.Errorf("slack id %s: %w", slackID, accounts.ErrSlackIDTaken)
	}
	if err == nil && n == 0 {
		err = accounts.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set slack id of user %d: %w", id, err)
	}
	return nil
}

// slackIDArg is a Slack id as stored: NULL when unset, so unset ids never
// collide in users_slack_id.
func slackIDArg(slackID string) any {
	if slackID == "" {
		return nil
	}
	return slackID
}

// isSlackIDViolation tells a unique violation of users_slack_id from one of
// users_email: SQLite names the column of a column index ("users.slack_id")
// and the index of an expression index ("index 'users_email'").
func isSlackIDViolation(err error) bool {
	return strings.Contains(err.Error(), "users.slack_id")
}

// isTelegramIDViolation tells a unique violation of users_telegram_id.
func isTelegramIDViolation(err error) bool {
	return strings.Contains(err.Error(), "users.telegram_id")
}

// UserSetTelegramID sets or clears the user's Telegram id; the partial
// unique index users_telegram_id keeps one user per id.
func (s *Store) UserSetTelegramID(ctx context.Context, p accounts.UserSetTelegramIDParams) error {
	n, err := s.exec(ctx, `UPDATE users SET telegram_id = ? WHERE id = ?`, telegramIDArg(p.TelegramID), p.ID)
	if isUniqueViolation(err) {
		return fmt.Errorf("telegram id %d: %w", p.TelegramID, accounts.ErrTelegramIDTaken)
	}
	if err == nil && n == 0 {
		err = accounts.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set telegram id of user %d: %w", p.ID, err)
	}
	return nil
}

// telegramIDArg is a Telegram id as stored: NULL when unset (0).
func telegramIDArg(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// UserGetByTelegramID finds the user with a Telegram id.
func (s *Store) UserGetByTelegramID(ctx context.Context, telegramID int64) (*accounts.User, error) {
	if telegramID == 0 {
		return nil, fmt.Errorf("no telegram id: %w", accounts.ErrNotFound)
	}
	return s.userWhere(ctx, telegramID, `telegram_id = ?`, telegramID)
}

// UserGetBySlackID finds the user with a Slack id.
func (s *Store) UserGetBySlackID(ctx context.Context, slackID string) (*accounts.User, error) {
	if slackID == "" {
		return nil, fmt.Errorf("empty slack id: %w", accounts.ErrNotFound)
	}
	return s.userWhere(ctx, slackID, `slack_id = ?`, slackID)
}

// UserGetByEmail finds a user by email, ignoring case.
func (s *Store) UserGetByEmail(ctx context.Context, email string) (*accounts.User, error) {
	return s.userWhere(ctx, email, `lower(email) = lower(?)`, email)
}

// UserGetByID finds a user by id.
func (s *Store) UserGetByID(ctx context.Context, id int64) (*accounts.User, error) {
	return s.userWhere(ctx, id, `id = ?`, id)
}

// UserList lists users in creation order.
func (s *Store) UserList(ctx context.Context) ([]*accounts.User, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+userColumns+` FROM users ORDER BY email`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var list []*accounts.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		list = append(list, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return list, nil
}

// UserDelete removes a user and ends their sessions.
func (s *Store) UserDelete(ctx context.Context, id int64) error {
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		// The foreign key cascades too; deleting explicitly does not depend
		// on the connection having foreign keys on.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, id); err != nil {
			return err
		}
		// Read by the user's email: before the row goes.
		if err := endGrantsOfUser(ctx, tx, id, queue.GrantEndGranterRemoved, time.Now()); err != nil {
			return err
		}
		n, err := rowsAffected(tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id))
		if err == nil && n == 0 {
			err = accounts.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	return nil
}

// UserCount counts users.
func (s *Store) UserCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

const tokenColumns = `id, name, created_at, revoked_at`

func scanToken(sc scanner) (*accounts.Token, error) {
	var (
		t       accounts.Token
		created string
		revoked sql.NullString
	)
	if err := sc.Scan(&t.ID, &t.Name, &created, &revoked); err != nil {
		return nil, err
	}
	var err error
	if t.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if t.RevokedAt, err = parseNullTime(revoked); err != nil {
		return nil, err
	}
	return &t, nil
}

// TokenCreate stores a new agent token; an active token of that name is
// ErrExists (the partial unique index agent_tokens_active_name).
func (s *Store) TokenCreate(ctx context.Context, p accounts.TokenCreateParams) (*accounts.Token, error) {
	name, hash, now := p.Name, p.Hash, p.Now
	var t *accounts.Token
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `INSERT INTO agent_tokens (name, token_hash, created_at)
		VALUES (?, ?, ?) RETURNING `+tokenColumns, name, hash, fmtTime(now)))
		return err
	})
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("token %s: %w", name, accounts.ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create token %s: %w", name, err)
	}
	return t, nil
}

// TokenGetByHash finds an active token.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*accounts.Token, error) {
	t, err := scanToken(s.read.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM agent_tokens
		WHERE token_hash = ? AND revoked_at IS NULL`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", accounts.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// TokenRevoke revokes the active token of that name.
func (s *Store) TokenRevoke(ctx context.Context, p accounts.TokenRevokeParams) error {
	name, now := p.Name, p.Now
	n, err := s.exec(ctx, `UPDATE agent_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL`, fmtTime(now), name)
	if err == nil && n == 0 {
		err = accounts.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", name, err)
	}
	return nil
}

// TokenList lists all tokens, revoked ones included, in creation order.
func (s *Store) TokenList(ctx context.Context) ([]*accounts.Token, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+tokenColumns+` FROM agent_tokens ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var list []*accounts.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		list = append(list, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return list, nil
}

// SessionGet returns a session that has not expired at now.
func (s *Store) SessionGet(ctx context.Context, p accounts.SessionGetParams) (*accounts.Session, error) {
	id, now := p.ID, p.Now
	var (
		ss               accounts.Session
		userID           sql.NullInt64
		created, expires string
	)
	err := s.read.QueryRowContext(ctx, `SELECT id, user_id, data, created_at, expires_at FROM sessions
		WHERE id = ? AND expires_at > ?`, id, fmtTime(now)).Scan(&ss.ID, &userID, &ss.Data, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session: %w", accounts.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	ss.UserID = userID.Int64
	if ss.CreatedAt, err = parseTime(created); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	if ss.ExpiresAt, err = parseTime(expires); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return &ss, nil
}

// SessionSave inserts or updates a session; its creation time stays.
func (s *Store) SessionSave(ctx context.Context, ss *accounts.Session) error {
	var userID any
	if ss.UserID != 0 {
		userID = ss.UserID
	}
	created := ss.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	_, err := s.exec(ctx, `INSERT INTO sessions (id, user_id, data, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, data = excluded.data, expires_at = excluded.expires_at`,
		ss.ID, userID, ss.Data, fmtTime(created), fmtTime(ss.ExpiresAt))
	if isForeignKeyViolation(err) {
		return fmt.Errorf("save session: user %d: %w", ss.UserID, accounts.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// SessionSetData implements accounts.Store.
func (s *Store) SessionSetData(ctx context.Context, p accounts.SessionSetDataParams) error {
	n, err := s.exec(ctx, `UPDATE sessions SET data = ? WHERE id = ?`, p.Data, p.ID)
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	if n == 0 {
		return accounts.ErrNotFound
	}
	return nil
}

// SessionDelete removes a session; an absent one is not an error.
func (s *Store) SessionDelete(ctx context.Context, id string) error {
	if _, err := s.exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// LoginFailureAdd records one failed login for subject (an account or an
// address).
func (s *Store) LoginFailureAdd(ctx context.Context, p accounts.LoginFailureParams) error {
	subject, at := p.Subject, p.At
	if _, err := s.exec(ctx, `INSERT INTO login_failures (subject, at) VALUES (?, ?)`, subject, fmtTime(at)); err != nil {
		return fmt.Errorf("record login failure: %w", err)
	}
	return nil
}

// LoginFailureCount counts failures of subject at or after since.
func (s *Store) LoginFailureCount(ctx context.Context, p accounts.LoginFailureCountParams) (int, error) {
	subject, since := p.Subject, p.Since
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM login_failures WHERE subject = ? AND at >= ?`,
		subject, fmtTime(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count login failures: %w", err)
	}
	return n, nil
}

// LoginFailureClear forgets the failures of subject.
func (s *Store) LoginFailureClear(ctx context.Context, subject string) error {
	if _, err := s.exec(ctx, `DELETE FROM login_failures WHERE subject = ?`, subject); err != nil {
		return fmt.Errorf("clear login failures: %w", err)
	}
	return nil
}

// LoginFailureRemove implements accounts.Store.
func (s *Store) LoginFailureRemove(ctx context.Context, p accounts.LoginFailureParams) error {
	subject, at := p.Subject, p.At
	if _, err := s.exec(ctx, `DELETE FROM login_failures WHERE subject = ? AND at = ?`, subject, fmtTime(at)); err != nil {
		return fmt.Errorf("remove login attempt: %w", err)
	}
	return nil
}

// AccountsPrune implements accounts.Store.
func (s *Store) AccountsPrune(ctx context.Context, p accounts.AccountsPruneParams) error {
	now, failuresBefore := p.Now, p.FailuresBefore
	if _, err := s.exec(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, fmtTime(now)); err != nil {
		return fmt.Errorf("prune sessions: %w", err)
	}
	if _, err := s.exec(ctx, `DELETE FROM login_failures WHERE at < ?`, fmtTime(failuresBefore)); err != nil {
		return fmt.Errorf("prune login failures: %w", err)
	}
	if _, err := s.exec(ctx, `DELETE FROM sso_states WHERE expires_at <= ?`, fmtTime(now)); err != nil {
		return fmt.Errorf("prune sign-in states: %w", err)
	}
	return nil
}

// SettingGet reads a setting.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := s.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("setting %s: %w", key, accounts.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get setting %s: %w", key, err)
	}
	return v, nil
}

// SettingInit stores value unless key exists and returns the stored value.
func (s *Store) SettingInit(ctx context.Context, p accounts.SettingParams) (string, error) {
	key, value := p.Key, p.Value
	var v string
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
			key, value); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	})
	if err != nil {
		return "", fmt.Errorf("init setting %s: %w", key, err)
	}
	return v, nil
}

// SettingTake implements accounts.Store.
func (s *Store) SettingTake(ctx context.Context, p accounts.SettingParams) (bool, error) {
	key, value := p.Key, p.Value
	n, err := s.exec(ctx, `DELETE FROM settings WHERE key = ? AND value = ?`, key, value)
	if err != nil {
		return false, fmt.Errorf("take setting %s: %w", key, err)
	}
	return n == 1, nil
}
