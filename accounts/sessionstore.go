package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/gorilla/sessions"
)

// Session values with a meaning to SessionStore.
const (
	// SessionUserID holds the signed-in user's id (int64). It is kept in its
	// own column, so that removing a user or changing a password ends the
	// user's sessions inside the database, for every server process at once.
	SessionUserID = "user_id"
)

// SessionOptions tune a SessionStore.
type SessionOptions struct {
	// MaxAge is the lifetime of a signed-in session; default 12h.
	MaxAge time.Duration
	// AnonymousMaxAge is the lifetime of a session that only carries a CSRF
	// token for the login form; default 1h.
	AnonymousMaxAge time.Duration
	// Secure forces the Secure cookie attribute; it is set anyway when the
	// request came over TLS.
	Secure bool
	// Now is the clock, default time.Now.
	Now func() time.Time
}

// SessionStore is a gorilla/sessions Store that keeps sessions in a Store
// (the database), so they survive restarts and work across server processes.
// The cookie carries only the session id, signed; the database row is keyed
// by a hash of that id, so a copy of the table opens no session.
type SessionStore struct {
	accounts Store
	codec    *securecookie.SecureCookie
	// preCodec signs the pre-session CSRF cookie, which lives
	// AnonymousMaxAge.
	preCodec *securecookie.SecureCookie
	opts     SessionOptions
}

// NewSessionStore returns a store signing cookies with secret (at least 32
// bytes).
func NewSessionStore(store Store, secret []byte, opts SessionOptions) (*SessionStore, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("session secret must be at least 32 bytes, got %d", len(secret))
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = 12 * time.Hour
	}
	if opts.AnonymousMaxAge <= 0 {
		opts.AnonymousMaxAge = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	codec := securecookie.New(secret, nil).SetSerializer(securecookie.NopEncoder{})
	codec.MaxAge(int(opts.MaxAge / time.Second))
	preCodec := securecookie.New(secret, nil).SetSerializer(securecookie.NopEncoder{})
	preCodec.MaxAge(int(opts.AnonymousMaxAge / time.Second))
	return &SessionStore{accounts: store, codec: codec, preCodec: preCodec, opts: opts}, nil
}

// Get returns the request's session, cached for the rest of the request.
func (s *SessionStore) Get(r *http.Request, name string) (*sessions.Session, error) {
	return sessions.GetRegistry(r).Get(s, name)
}

// New loads the session named by the request's cookie. A missing, forged,
// expired or ended session yields a new empty session and no error: the
// caller is simply anonymous. Only a storage failure is an error.
func (s *SessionStore) New(r *http.Request, name string) (*sessions.Session, error) {
	sess := sessions.NewSession(s, name)
	sess.Options = s.cookieOptions(r, s.opts.MaxAge)
	sess.IsNew = true
	c, err := r.Cookie(name)
	if err != nil {
		return sess, nil
	}
	var raw []byte
	if err := s.codec.Decode(name, c.Value, &raw); err != nil {
		return sess, nil
	}
	id := string(raw)
	row, err := s.accounts.SessionGet(r.Context(), SessionGetParams{ID: HashToken(id), Now: s.opts.Now()})
	if errors.Is(err, ErrNotFound) {
		return sess, nil
	}
	if err != nil {
		return sess, fmt.Errorf("load session: %w", err)
	}
	values := map[string]string{}
	if row.Data != "" {
		if err := json.Unmarshal([]byte(row.Data), &values); err != nil {
			return sess, nil // unreadable: start afresh rather than fail every request
		}
	}
	for k, v := range values {
		sess.Values[k] = v
	}
	if row.UserID != 0 {
		sess.Values[SessionUserID] = row.UserID
	}
	sess.ID = id
	sess.IsNew = false
	return sess, nil
}

// Save writes the session and sets its cookie. Options.MaxAge < 0 deletes
// the session from the database and expires the cookie (logout). Values
// must be strings, except SessionUserID (int64).
func (s *SessionStore) Save(r *http.Request, w http.ResponseWriter, sess *sessions.Session) error {
	if sess.Options != nil && sess.Options.MaxAge < 0 {
		if sess.ID != "" {
			if err := s.accounts.SessionDelete(r.Context(), HashToken(sess.ID)); err != nil {
				return fmt.Errorf("delete session: %w", err)
			}
		}
		http.SetCookie(w, sessions.NewCookie(sess.Name(), "", s.cookieOptions(r, -1)))
		return nil
	}
	data, userID, err := encodeValues(sess)
	if err != nil {
		return err
	}
	if sess.ID == "" {
		sess.ID = RandomString(32)
	}
	maxAge := s.opts.AnonymousMaxAge
	if userID != 0 {
		maxAge = s.opts.MaxAge
	}
	now := s.opts.Now().UTC().Truncate(time.Microsecond)
	row := &Session{ID: HashToken(sess.ID), UserID: userID, Data: data, CreatedAt: now, ExpiresAt: now.Add(maxAge)}
	if err := s.accounts.SessionSave(r.Context(), row); err != nil {
		return err
	}
	encoded, err := s.codec.Encode(sess.Name(), []byte(sess.ID))
	if err != nil {
		return fmt.Errorf("sign session cookie: %w", err)
	}
	sess.Options = s.cookieOptions(r, maxAge)
	sess.IsNew = false
	http.SetCookie(w, sessions.NewCookie(sess.Name(), encoded, sess.Options))
	return nil
}

// encodeValues is what Save stores of sess: the data column (every value
// but the user id, which has a column of its own) and the user id.
func encodeValues(sess *sessions.Session) (string, int64, error) {
	values := make(map[string]string, len(sess.Values))
	var userID int64
	for k, v := range sess.Values {
		key, ok := k.(string)
		if !ok {
			return "", 0, fmt.Errorf("session value key %v is not a string", k)
		}
		if key == SessionUserID {
			id, ok := v.(int64)
			if !ok {
				return "", 0, fmt.Errorf("session value %s must be an int64", SessionUserID)
			}
			userID = id
			continue
		}
		str, ok := v.(string)
		if !ok {
			return "", 0, fmt.Errorf("session value %s is a %T, not a string", key, v)
		}
		values[key] = str
	}
	data, err := json.Marshal(values)
	if err != nil {
		return "", 0, fmt.Errorf("encode session: %w", err)
	}
	return string(data), userID, nil
}

// Update writes the values of a stored session again, keeping its user,
// its expiry and its cookie: ErrNotFound when it ended meanwhile (a logout
// stays a logout). What a single sign-on's recheck learns is kept this
// way, in the middle of an event stream too, where no cookie can be set.
func (s *SessionStore) Update(ctx context.Context, sess *sessions.Session) error {
	if sess.ID == "" {
		return ErrNotFound
	}
	data, _, err := encodeValues(sess)
	if err != nil {
		return err
	}
	return s.accounts.SessionSetData(ctx, SessionSetDataParams{ID: HashToken(sess.ID), Data: data})
}

// PreSessionToken returns the CSRF token of an anonymous visitor (the
// login form's), kept in the signed cookie name rather than a session
// row: a visitor who never signs in writes nothing to the database, so
// anonymous traffic cannot fill the sessions table. A missing, forged or
// expired cookie is replaced with a new token.
func (s *SessionStore) PreSessionToken(w http.ResponseWriter, r *http.Request, name string) (string, error) {
	if tok := s.PreSessionTokenOf(r, name); tok != "" {
		return tok, nil
	}
	tok := RandomString(32)
	encoded, err := s.preCodec.Encode(name, []byte(tok))
	if err != nil {
		return "", fmt.Errorf("sign CSRF cookie: %w", err)
	}
	http.SetCookie(w, sessions.NewCookie(name, encoded, s.cookieOptions(r, s.opts.AnonymousMaxAge)))
	return tok, nil
}

// PreSessionTokenOf returns the token of the request's signed pre-session
// cookie name, or "" when it is missing, forged or expired.
func (s *SessionStore) PreSessionTokenOf(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	var raw []byte
	if err := s.preCodec.Decode(name, c.Value, &raw); err != nil {
		return ""
	}
	return string(raw)
}

// Renew gives sess a fresh id, deleting the old row: called on login so a
// session id planted before login (session fixation) is worth nothing.
func (s *SessionStore) Renew(ctx context.Context, sess *sessions.Session) error {
	if sess.ID != "" {
		if err := s.accounts.SessionDelete(ctx, HashToken(sess.ID)); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
	}
	sess.ID = ""
	return nil
}

func (s *SessionStore) cookieOptions(r *http.Request, maxAge time.Duration) *sessions.Options {
	age := int(maxAge / time.Second)
	if maxAge < 0 {
		age = -1
	}
	return &sessions.Options{
		Path:     "/",
		MaxAge:   age,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   s.opts.Secure || r.TLS != nil,
	}
}
