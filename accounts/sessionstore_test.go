package accounts_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/postgres/pgtest"
)

const cookieName = "approvals_session"

var secret = []byte("0123456789abcdef0123456789abcdef")

func newUser(t *testing.T, store accounts.Store, email string) *accounts.User {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	u, err := store.UserCreate(context.Background(), &accounts.User{Email: email, PasswordHash: "x", Role: accounts.RoleViewer,
		CreatedAt: now, PasswordChangedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// save stores values in a new session and returns its cookie.
func save(t *testing.T, s *accounts.SessionStore, values map[any]any, overTLS bool) *http.Cookie {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if overTLS {
		r.TLS = &tls.ConnectionState{}
	}
	sess, err := s.New(r, cookieName)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		sess.Values[k] = v
	}
	w := httptest.NewRecorder()
	if err := s.Save(r, w, sess); err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("%d cookies", len(cookies))
	}
	return cookies[0]
}

// load reads the session a cookie names.
func load(t *testing.T, s *accounts.SessionStore, c *http.Cookie) (map[any]any, bool) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if c != nil {
		r.AddCookie(c)
	}
	sess, err := s.New(r, cookieName)
	if err != nil {
		t.Fatal(err)
	}
	return sess.Values, !sess.IsNew
}

func TestSessionStoreRoundTrip(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	db := pgtest.OpenURL(t, url)
	s, err := accounts.NewSessionStore(db, secret, accounts.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := newUser(t, db, "ann@example.com")
	c := save(t, s, map[any]any{"csrf": "token-value", accounts.SessionUserID: u.ID}, false)

	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" {
		t.Fatalf("cookie attributes: %+v", c)
	}
	if strings.Contains(c.Value, "token-value") || len(c.Value) > 200 {
		t.Fatalf("the cookie carries more than a signed id: %q", c.Value)
	}
	values, ok := load(t, s, c)
	if !ok || values["csrf"] != "token-value" || values[accounts.SessionUserID] != u.ID {
		t.Fatalf("loaded %v (found %t)", values, ok)
	}

	// Another process, or this one after a restart: a new store on the
	// same database with the same secret.
	other, _ := accounts.NewSessionStore(pgtest.OpenURL(t, url), secret, accounts.SessionOptions{})
	if values, ok := load(t, other, c); !ok || values["csrf"] != "token-value" {
		t.Fatalf("another store: %v (found %t)", values, ok)
	}
	// Another secret does not accept the cookie.
	forged, _ := accounts.NewSessionStore(db, []byte("another secret of thirty-two bytes!!"), accounts.SessionOptions{})
	if _, ok := load(t, forged, c); ok {
		t.Fatal("a cookie signed with another secret opened a session")
	}
	tampered := *c
	tampered.Value = strings.ToUpper(c.Value[:10]) + c.Value[10:]
	if _, ok := load(t, s, &tampered); ok {
		t.Fatal("a tampered cookie opened a session")
	}
	if _, ok := load(t, s, nil); ok {
		t.Fatal("no cookie opened a session")
	}
}

func TestSessionStoreSecureOverTLS(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t)
	s, _ := accounts.NewSessionStore(db, secret, accounts.SessionOptions{})
	if c := save(t, s, map[any]any{"csrf": "x"}, true); !c.Secure {
		t.Fatal("cookie over TLS is not Secure")
	}
	forced, _ := accounts.NewSessionStore(db, secret, accounts.SessionOptions{Secure: true})
	if c := save(t, forced, map[any]any{"csrf": "x"}, false); !c.Secure {
		t.Fatal("Secure option ignored")
	}
	if _, err := accounts.NewSessionStore(db, []byte("short"), accounts.SessionOptions{}); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

func TestSessionStoreEnds(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t)
	ctx := context.Background()
	clock := time.Now()
	s, _ := accounts.NewSessionStore(db, secret, accounts.SessionOptions{MaxAge: time.Hour, AnonymousMaxAge: time.Minute,
		Now: func() time.Time { return clock }})

	t.Run("logout deletes the row", func(t *testing.T) {
		c := save(t, s, map[any]any{"csrf": "x"}, false)
		r := httptest.NewRequest(http.MethodPost, "/logout", nil)
		r.AddCookie(c)
		sess, _ := s.New(r, cookieName)
		sess.Options.MaxAge = -1
		w := httptest.NewRecorder()
		if err := s.Save(r, w, sess); err != nil {
			t.Fatal(err)
		}
		if got := w.Result().Cookies(); len(got) != 1 || got[0].MaxAge >= 0 {
			t.Fatalf("logout cookie %+v", got)
		}
		if _, ok := load(t, s, c); ok {
			t.Fatal("the old cookie still opens the session")
		}
	})

	t.Run("user removal and password change", func(t *testing.T) {
		gone := newUser(t, db, "gone@example.com")
		moved := newUser(t, db, "moved@example.com")
		c1 := save(t, s, map[any]any{accounts.SessionUserID: gone.ID}, false)
		c2 := save(t, s, map[any]any{accounts.SessionUserID: moved.ID}, false)
		if err := db.UserDelete(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.UserSetPassword(ctx, accounts.UserSetPasswordParams{ID: moved.ID, PasswordHash: "y", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*http.Cookie{c1, c2} {
			if _, ok := load(t, s, c); ok {
				t.Fatal("a session survived its user's removal or password change")
			}
		}
	})

	t.Run("renew changes the id", func(t *testing.T) {
		c := save(t, s, map[any]any{"csrf": "x"}, false)
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.AddCookie(c)
		sess, _ := s.New(r, cookieName)
		old := sess.ID
		if err := s.Renew(ctx, sess); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		if err := s.Save(r, w, sess); err != nil {
			t.Fatal(err)
		}
		if sess.ID == old || sess.ID == "" {
			t.Fatal("renew kept the id")
		}
		if _, ok := load(t, s, c); ok {
			t.Fatal("the pre-login id still opens the session")
		}
		if _, ok := load(t, s, w.Result().Cookies()[0]); !ok {
			t.Fatal("the renewed session does not load")
		}
		// The row is keyed by a hash of the id, not the id itself.
		if _, err := db.SessionGet(ctx, accounts.SessionGetParams{ID: sess.ID, Now: time.Now()}); err == nil {
			t.Fatal("the raw session id is a database key")
		}
	})

	t.Run("expiry", func(t *testing.T) {
		u := newUser(t, db, "late@example.com")
		anon := save(t, s, map[any]any{"csrf": "x"}, false)
		signed := save(t, s, map[any]any{accounts.SessionUserID: u.ID}, false)
		clock = clock.Add(2 * time.Minute)
		if _, ok := load(t, s, anon); ok {
			t.Fatal("an anonymous session outlived AnonymousMaxAge")
		}
		if _, ok := load(t, s, signed); !ok {
			t.Fatal("a signed-in session ended before MaxAge")
		}
		clock = clock.Add(time.Hour)
		if _, ok := load(t, s, signed); ok {
			t.Fatal("a signed-in session outlived MaxAge")
		}
	})

	t.Run("values must be strings", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		sess, _ := s.New(r, cookieName)
		sess.Values["n"] = 3
		if err := s.Save(r, httptest.NewRecorder(), sess); err == nil {
			t.Fatal("a non-string value was saved")
		}
	})
}
