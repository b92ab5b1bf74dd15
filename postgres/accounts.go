package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

func scanUser(row rowScanner, extra ...any) (*accounts.User, error) {
	var u accounts.User
	var role string
	var groups []byte
	dest := append([]any{&u.ID, &u.Email, &u.PasswordHash, &role, &u.CreatedAt, &u.PasswordChangedAt, &u.SlackID, &u.TelegramID,
		&u.SSOSubject, &groups, &u.IdPSyncedAt, &u.SSODeniedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, accounts.ErrNotFound
		}
		return nil, err
	}
	u.Role = accounts.Role(role)
	if err := json.Unmarshal(groups, &u.IdPGroups); err != nil {
		return nil, fmt.Errorf("user %d: idp_groups: %w", u.ID, err)
	}
	for _, t := range []**time.Time{&u.IdPSyncedAt, &u.SSODeniedAt} {
		if *t != nil {
			utc := (*t).UTC()
			*t = &utc
		}
	}
	return &u, nil
}

// UserSSOSignIn implements accounts.Store: one upsert on the unique index
// users_email, so concurrent first sign-ins of one person create one user;
// a role that decides nothing ends the user's grants in its transaction.
func (s *Store) UserSSOSignIn(ctx context.Context, p accounts.UserSSOSignInParams) (accounts.UserSSOSignInResult, error) {
	var (
		created bool
		u       *accounts.User
	)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = scanUser(tx.QueryRow(ctx, userSSOSignInSQL, p.Email, string(p.Role), p.Now, p.Subject, accounts.IdPGroupsJSON(p.IdPGroups)), &created); err != nil {
			return err
		}
		if created || p.Role.CanDecide() {
			return nil
		}
		// The provider's groups now give a role that decides nothing.
		return endGrantsOfUser(ctx, tx, u.ID, queue.GrantEndGranterDemoted, p.Now)
	})
	if err != nil {
		return accounts.UserSSOSignInResult{}, fmt.Errorf("single sign-on of %s: %w", p.Email, err)
	}
	return accounts.UserSSOSignInResult{User: u, Created: created}, nil
}

// UserSSODeny implements accounts.Store: the update and the end of the
// user's sessions and grants in one transaction.
func (s *Store) UserSSODeny(ctx context.Context, p accounts.UserSSODenyParams) (*accounts.User, error) {
	var u *accounts.User
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = scanUser(tx.QueryRow(ctx, userSSODenySQL, p.Email, p.Subject, accounts.IdPGroupsJSON(p.IdPGroups), p.Now)); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, userEndSessionsSQL, u.ID); err != nil {
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
	tag, err := s.pool.Exec(ctx, ssoStateUseSQL, p.Hash, p.ExpiresAt)
	if err != nil {
		return fmt.Errorf("use sign-in state: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return accounts.ErrStateUsed
	}
	return nil
}

// UserCreate implements accounts.Store: one INSERT, refused whole by the
// unique index users_email, users_slack_id or users_telegram_id.
func (s *Store) UserCreate(ctx context.Context, u *accounts.User) (*accounts.User, error) {
	got, err := scanUser(s.pool.QueryRow(ctx, userCreateSQL,
		u.Email, u.PasswordHash, string(u.Role), u.CreatedAt, slackIDArg(u.SlackID), telegramIDArg(u.TelegramID)))
	if isUniqueViolationOf(err, "users_slack_id") {
		return nil, fmt.Errorf("user %s: slack id %s: %w", u.Email, u.SlackID, accounts.ErrSlackIDTaken)
	}
	if isUniqueViolationOf(err, "users_telegram_id") {
		return nil, fmt.Errorf("user %s: telegram id %d: %w", u.Email, u.TelegramID, accounts.ErrTelegramIDTaken)
	}
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("user %s: %w", u.Email, accounts.ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", u.Email, err)
	}
	return got, nil
}

// UserSetPassword implements accounts.Store; it ends the user's sessions.
func (s *Store) UserSetPassword(ctx context.Context, p accounts.UserSetPasswordParams) error {
	id, hash, now := p.ID, p.PasswordHash, p.Now
	if err := s.updateUserEndingSessions(ctx, userSetPasswordSQL, id, "", now, hash, now); err != nil {
		return fmt.Errorf("set password of user %d: %w", id, err)
	}
	return nil
}

// UserUpdate implements accounts.Store: one UPDATE of the row (the unique
// index users_slack_id refuses a taken Slack id) and the end of the user's
// sessions, in one transaction.
func (s *Store) UserUpdate(ctx context.Context, p accounts.UserUpdateParams) error {
	id, hash, role, slackID, now := p.ID, p.PasswordHash, p.Role, p.SlackID, p.Now
	// A role that decides nothing ends the user's grants with the update.
	grantsEnd := ""
	if !role.CanDecide() {
		grantsEnd = queue.GrantEndGranterDemoted
	}
	err := s.updateUserEndingSessions(ctx, userUpdateSQL, id, grantsEnd, now, hash, now, string(role), slackIDArg(slackID), telegramIDArg(p.TelegramID))
	if errors.Is(err, accounts.ErrSlackIDTaken) {
		return fmt.Errorf("slack id %s: %w", slackID, err)
	}
	if errors.Is(err, accounts.ErrTelegramIDTaken) {
		return fmt.Errorf("telegram id %d: %w", p.TelegramID, err)
	}
	if err != nil {
		return fmt.Errorf("update user %d: %w", id, err)
	}
	return nil
}

// updateUserEndingSessions runs update, an UPDATE of the user id ($1, its
// other parameters from $2), and ends the user's sessions, and with a
// grantsEnd reason their grants (at now), in one transaction: ErrNotFound
// for no such user, ErrSlackIDTaken or ErrTelegramIDTaken when the new id
// is another user's (the only unique columns it changes).
func (s *Store) updateUserEndingSessions(ctx context.Context, update string, id int64, grantsEnd string, now time.Time, args ...any) error {
	return s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, update, append([]any{id}, args...)...)
		if isUniqueViolationOf(err, "users_telegram_id") {
			return accounts.ErrTelegramIDTaken
		}
		if isUniqueViolation(err) {
			return accounts.ErrSlackIDTaken
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return accounts.ErrNotFound
		}
		if _, err = tx.Exec(ctx, userEndSessionsSQL, id); err != nil || grantsEnd == "" {
			return err
		}
		return endGrantsOfUser(ctx, tx, id, grantsEnd, now)
	})
}

// UserSetRole implements accounts.Store: a role that decides nothing ends
// the user's grants in the same transaction.
func (s *Store) UserSetRole(ctx context.Context, p accounts.UserSetRoleParams) error {
	id, role := p.ID, p.Role
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, userSetRoleSQL, id, string(role))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return accounts.ErrNotFound
		}
		if role.CanDecide() {
			return nil
		}
		return endGrantsOfUser(ctx, tx, id, queue.GrantEndGranterDemoted, p.At())
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("set role: %w", err)
	}
	return nil
}

// UserSetSlackID implements accounts.Store; the partial unique index
// users_slack_id keeps one user per Slack id.
func (s *Store) UserSetSlackID(ctx context.Context, p accounts.UserSetSlackIDParams) error {
	id, slackID := p.ID, p.SlackID
	tag, err := s.pool.Exec(ctx, userSetSlackIDSQL, id, slackIDArg(slackID))
	if isUniqueViolation(err) {
		return fmt.Errorf("slack id %s: %w", slackID, accounts.ErrSlackIDTaken)
	}
	if err != nil {
		return fmt.Errorf("set slack id: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return accounts.ErrNotFound
	}
	return nil
}

// slackIDArg is a Slack id as stored: NULL when unset, so unset ids never
// collide in users_slack_id.
func slackIDArg(slackID string) *string {
	if slackID == "" {
		return nil
	}
	return &slackID
}

// UserGetBySlackID implements accounts.Store.
func (s *Store) UserGetBySlackID(ctx context.Context, slackID string) (*accounts.User, error) {
	if slackID == "" {
		return nil, accounts.ErrNotFound
	}
	return scanUser(s.pool.QueryRow(ctx, userGetBySlackIDSQL, slackID))
}

// UserSetTelegramID implements accounts.Store; the partial unique index
// users_telegram_id keeps one user per Telegram id.
func (s *Store) UserSetTelegramID(ctx context.Context, p accounts.UserSetTelegramIDParams) error {
	tag, err := s.pool.Exec(ctx, userSetTelegramIDSQL, p.ID, telegramIDArg(p.TelegramID))
	if isUniqueViolation(err) {
		return fmt.Errorf("telegram id %d: %w", p.TelegramID, accounts.ErrTelegramIDTaken)
	}
	if err != nil {
		return fmt.Errorf("set telegram id: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return accounts.ErrNotFound
	}
	return nil
}

// telegramIDArg is a Telegram id as stored: NULL when unset (0).
func telegramIDArg(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// UserGetByTelegramID implements accounts.Store.
func (s *Store) UserGetByTelegramID(ctx context.Context, telegramID int64) (*accounts.User, error) {
	if telegramID == 0 {
		return nil, accounts.ErrNotFound
	}
	return scanUser(s.pool.QueryRow(ctx, userGetByTelegramIDSQL, telegramID))
}

// UserGetByEmail implements accounts.Store.
func (s *Store) UserGetByEmail(ctx context.Context, email string) (*accounts.User, error) {
	return scanUser(s.pool.QueryRow(ctx, userGetByEmailSQL, email))
}

// UserGetByID implements accounts.Store.
func (s *Store) UserGetByID(ctx context.Context, id int64) (*accounts.User, error) {
	return scanUser(s.pool.QueryRow(ctx, userGetByIDSQL, id))
}

// UserList implements accounts.Store.
func (s *Store) UserList(ctx context.Context) ([]*accounts.User, error) {
	rows, err := s.pool.Query(ctx, userListSQL)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []*accounts.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// UserDelete implements accounts.Store; sessions go with the user, and
// their grants end in the same transaction (read before the row goes).
func (s *Store) UserDelete(ctx context.Context, id int64) error {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := endGrantsOfUser(ctx, tx, id, queue.GrantEndGranterRemoved, time.Now()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, userDeleteSQL, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return accounts.ErrNotFound
		}
		return nil
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	return nil
}

// UserCount implements accounts.Store.
func (s *Store) UserCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, userCountSQL).Scan(&n)
	return n, err
}

func scanToken(row rowScanner) (*accounts.Token, error) {
	var t accounts.Token
	if err := row.Scan(&t.ID, &t.Name, &t.CreatedAt, &t.RevokedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, accounts.ErrNotFound
		}
		return nil, err
	}
	return &t, nil
}

// TokenCreate implements accounts.Store.
func (s *Store) TokenCreate(ctx context.Context, p accounts.TokenCreateParams) (*accounts.Token, error) {
	name, hash, now := p.Name, p.Hash, p.Now
	t, err := scanToken(s.pool.QueryRow(ctx, tokenCreateSQL, name, hash, now))
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("token %s: %w", name, accounts.ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create token %s: %w", name, err)
	}
	return t, nil
}

// TokenGetByHash implements accounts.Store.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*accounts.Token, error) {
	// Every API request runs this, so it goes through the batcher.
	// A read: it leaves a batch of replays lazy.
	v, err := s.batch.call(ctx, &batchCall{kind: tokenLookups{}, arg: hash, read: true,
		sql:  tokenGetByHashSQL,
		args: []any{hash}, scan: func(row pgx.Row) (any, error) { return scanToken(row) }})
	if err != nil {
		return nil, err
	}
	return v.(*accounts.Token), nil
}

// tokenLookups merges the token lookups of a batch.
type tokenLookups struct{}

func (tokenLookups) merge(calls []*batchCall) (string, []any) {
	hashes := make([]string, len(calls))
	for i, c := range calls {
		hashes[i] = c.arg.(string)
	}
	return tokenGetByHashManySQL, []any{hashes}
}

// TokenRevoke implements accounts.Store.
func (s *Store) TokenRevoke(ctx context.Context, p accounts.TokenRevokeParams) error {
	name, now := p.Name, p.Now
	tag, err := s.pool.Exec(ctx, tokenRevokeSQL, name, now)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("token %s: %w", name, accounts.ErrNotFound)
	}
	return nil
}

// TokenList implements accounts.Store.
func (s *Store) TokenList(ctx context.Context) ([]*accounts.Token, error) {
	rows, err := s.pool.Query(ctx, tokenListSQL)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []*accounts.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SessionGet implements accounts.Store.
func (s *Store) SessionGet(ctx context.Context, p accounts.SessionGetParams) (*accounts.Session, error) {
	id, now := p.ID, p.Now
	var sess accounts.Session
	var uid *int64
	err := s.pool.QueryRow(ctx, sessionGetSQL, id, now).
		Scan(&sess.ID, &uid, &sess.Data, &sess.CreatedAt, &sess.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, accounts.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	if uid != nil {
		sess.UserID = *uid
	}
	return &sess, nil
}

// SessionSave implements accounts.Store.
func (s *Store) SessionSave(ctx context.Context, sess *accounts.Session) error {
	var uid *int64
	if sess.UserID != 0 {
		uid = &sess.UserID
	}
	_, err := s.pool.Exec(ctx, sessionSaveSQL,
		sess.ID, uid, sess.Data, sess.CreatedAt, sess.ExpiresAt)
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// SessionSetData implements accounts.Store.
func (s *Store) SessionSetData(ctx context.Context, p accounts.SessionSetDataParams) error {
	tag, err := s.pool.Exec(ctx, sessionSetDataSQL, p.ID, p.Data)
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return accounts.ErrNotFound
	}
	return nil
}

// SessionDelete implements accounts.Store.
func (s *Store) SessionDelete(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, sessionDeleteSQL, id)
	return err
}

// LoginFailureAdd implements accounts.Store.
func (s *Store) LoginFailureAdd(ctx context.Context, p accounts.LoginFailureParams) error {
	subject, at := p.Subject, p.At
	_, err := s.pool.Exec(ctx, loginFailureAddSQL, subject, at)
	return err
}

// LoginFailureCount implements accounts.Store.
func (s *Store) LoginFailureCount(ctx context.Context, p accounts.LoginFailureCountParams) (int, error) {
	subject, since := p.Subject, p.Since
	var n int
	err := s.pool.QueryRow(ctx, loginFailureCountSQL, subject, since).Scan(&n)
	return n, err
}

// LoginFailureRemove implements accounts.Store.
func (s *Store) LoginFailureRemove(ctx context.Context, p accounts.LoginFailureParams) error {
	subject, at := p.Subject, p.At
	_, err := s.pool.Exec(ctx, loginFailureRemoveSQL, subject, at)
	return err
}

// LoginFailureClear implements accounts.Store.
func (s *Store) LoginFailureClear(ctx context.Context, subject string) error {
	_, err := s.pool.Exec(ctx, loginFailureClearSQL, subject)
	return err
}

// AccountsPrune implements accounts.Store.
func (s *Store) AccountsPrune(ctx context.Context, p accounts.AccountsPruneParams) error {
	now, failuresBefore := p.Now, p.FailuresBefore
	if _, err := s.pool.Exec(ctx, sessionPruneSQL, now); err != nil {
		return fmt.Errorf("prune sessions: %w", err)
	}
	if _, err := s.pool.Exec(ctx, loginFailurePruneSQL, failuresBefore); err != nil {
		return fmt.Errorf("prune login failures: %w", err)
	}
	if _, err := s.pool.Exec(ctx, ssoStatePruneSQL, now); err != nil {
		return fmt.Errorf("prune sign-in states: %w", err)
	}
	return nil
}

// SettingGet implements accounts.Store.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, settingGetSQL, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", accounts.ErrNotFound
	}
	return v, err
}

// SettingInit implements accounts.Store.
func (s *Store) SettingInit(ctx context.Context, p accounts.SettingParams) (string, error) {
	key, value := p.Key, p.Value
	if _, err := s.pool.Exec(ctx, settingInitSQL, key, value); err != nil {
		return "", fmt.Errorf("init setting %s: %w", key, err)
	}
	return s.SettingGet(ctx, key)
}

// SettingTake implements accounts.Store.
func (s *Store) SettingTake(ctx context.Context, p accounts.SettingParams) (bool, error) {
	key, value := p.Key, p.Value
	tag, err := s.pool.Exec(ctx, settingTakeSQL, key, value)
	if err != nil {
		return false, fmt.Errorf("take setting %s: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}
