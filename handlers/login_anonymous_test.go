package handlers_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/storage"
)

// writeSpy counts the calls that write to the accounts tables, updates
// included (which row counts cannot see).
type writeSpy struct {
	storage.Store
	writes atomic.Int64
	last   atomic.Value // string: the last write method
}

func (s *writeSpy) wrote(method string) { s.writes.Add(1); s.last.Store(method) }

func (s *writeSpy) SessionSave(ctx context.Context, x *accounts.Session) error {
	s.wrote("SessionSave")
	return s.Store.SessionSave(ctx, x)
}

func (s *writeSpy) SessionDelete(ctx context.Context, id string) error {
	s.wrote("SessionDelete")
	return s.Store.SessionDelete(ctx, id)
}

func (s *writeSpy) LoginFailureAdd(ctx context.Context, p accounts.LoginFailureParams) error {
	s.wrote("LoginFailureAdd")
	return s.Store.LoginFailureAdd(ctx, p)
}

func (s *writeSpy) LoginFailureRemove(ctx context.Context, p accounts.LoginFailureParams) error {
	s.wrote("LoginFailureRemove")
	return s.Store.LoginFailureRemove(ctx, p)
}

func (s *writeSpy) LoginFailureClear(ctx context.Context, subject string) error {
	s.wrote("LoginFailureClear")
	return s.Store.LoginFailureClear(ctx, subject)
}

func (s *writeSpy) SettingInit(ctx context.Context, p accounts.SettingParams) (string, error) {
	s.wrote("SettingInit")
	return s.Store.SettingInit(ctx, p)
}

func (s *writeSpy) SettingTake(ctx context.Context, p accounts.SettingParams) (bool, error) {
	s.wrote("SettingTake")
	return s.Store.SettingTake(ctx, p)
}

// rowCounter counts the rows of every table of one store's database.
type rowCounter func(t *testing.T) map[string]int

// processRows counts the rows of a's database, whichever store it runs on.
func processRows(t *testing.T, a *apptest.App) rowCounter {
	t.Helper()
	if a.SQLitePath == "" {
		return postgresRows(a.Store.(*postgres.Store).Pool())
	}
	db, err := sql.Open("sqlite", a.SQLitePath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return sqliteRows(db)
}

func postgresRows(pool *pgxpool.Pool) rowCounter {
	return func(t *testing.T) map[string]int {
		t.Helper()
		rows, err := pool.Query(t.Context(), `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, tb := range tables {
			var n int
			if err := pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %q`, tb)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[tb] = n
		}
		if len(out) == 0 {
			t.Fatal("no tables found")
		}
		return out
	}
}

func sqliteRows(db *sql.DB) rowCounter {
	return func(t *testing.T) map[string]int {
		t.Helper()
		rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for rows.Next() {
			var tb string
			if err := rows.Scan(&tb); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tb)
		}
		rows.Close()
		out := map[string]int{}
		for _, tb := range tables {
			var n int
			if err := db.QueryRowContext(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %q`, tb)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[tb] = n
		}
		if len(out) == 0 {
			t.Fatal("no tables found")
		}
		return out
	}
}

// TestAnonymousTrafficWritesNothing: the login page, a login with a bad
// CSRF token, a logout, unknown paths and anonymous dashboard pages write
// no row and call no write of the accounts store, on both stores; the
// login form still works with the pre-session cookie it was given.
func TestAnonymousTrafficWritesNothing(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spy := &writeSpy{}
			d := apptest.StartDashboard(t, apptest.Options{SQLite: onSQLite,
				WrapAll: func(s storage.Store) storage.Store { spy.Store = s; return spy }})
			rows := processRows(t, d.App)
			// A user exists, so the setup link is not what /login offers.
			d.AddUser("ann@example.com", accounts.RoleAdmin)
			before, writesBefore := rows(t), spy.writes.Load()

			browser := d.Anonymous()
			browser.Get("/login").WantStatus(t, http.StatusOK)
			if browser.CSRF() == "" {
				t.Fatal("the login page carries no CSRF token")
			}
			for _, tc := range []struct {
				method, path string
				form         url.Values
				want         int
			}{
				{"POST", "/login", url.Values{"_csrf": {"forged"}, "email": {"ann@example.com"}, "password": {"x"}}, http.StatusForbidden},
				{"POST", "/login", url.Values{"_csrf": {""}, "email": {"ann@example.com"}, "password": {"x"}}, http.StatusForbidden},
				{"POST", "/logout", url.Values{"_csrf": {"forged"}}, http.StatusForbidden},
				{"POST", "/logout", url.Values{}, http.StatusSeeOther},
				{"GET", "/no/such/page", nil, http.StatusNotFound},
				{"POST", "/no/such/page", url.Values{}, http.StatusNotFound},
				{"GET", "/", nil, http.StatusSeeOther},
				{"GET", "/actions/x", nil, http.StatusSeeOther},
				{"POST", "/actions/x/approve", url.Values{}, http.StatusSeeOther},
				{"GET", "/setup?token=wrong", nil, 0},
			} {
				var p page
				if tc.method == "GET" {
					p = browser.Get(tc.path)
				} else {
					p = browser.Post(tc.path, tc.form)
				}
				if tc.want != 0 {
					p.WantStatus(t, tc.want)
				}
			}
			after, writesAfter := rows(t), spy.writes.Load()
			if writesAfter != writesBefore {
				t.Errorf("anonymous traffic called %d store writes (the last %v)", writesAfter-writesBefore, spy.last.Load())
			}
			for table, n := range after {
				if n != before[table] {
					t.Errorf("table %s: %d rows before anonymous traffic, %d after", table, before[table], n)
				}
			}
			// The pre-session token still opens the login form.
			browser.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}}).WantRedirect(t, "/")
			// A sign-in does write (its session): the spy sees the writes
			// of the process, so its silence above means something.
			if spy.writes.Load() == writesAfter {
				t.Error("the spy saw no write of a sign-in: it does not watch the process's accounts store")
			}
		})
	}
}
