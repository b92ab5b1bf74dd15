package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "08006"}), true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"lost mid-answer", fmt.Errorf("scan: %w", io.ErrUnexpectedEOF), true},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"a bug", errors.New("nil map"), false},
		{"canceled", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := (&postgres.Store{}).Unavailable(c.err); got != c.want {
			t.Errorf("%s: unavailable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestUnavailableNotPinged: a request that met a lost connection is
// answered unavailable even though the database answers the ping after it
// (during a failover the ping may already reach the new primary).
func TestUnavailableNotPinged(t *testing.T) {
	s := pgtest.Open(t)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("the test database should answer: %v", err)
	}
	qe := queue.ErrorOf(context.Background(), fmt.Errorf("token lookup: %w", io.ErrUnexpectedEOF), s, nil)
	if qe.Code != queue.CodeUnavailable {
		t.Fatalf("a lost connection is answered %s, want unavailable", qe.Code)
	}
	qe = queue.ErrorOf(context.Background(), errors.New("a bug"), s, nil)
	if qe.Code != queue.CodeInternal {
		t.Fatalf("a bug with the database up is answered %s, want internal", qe.Code)
	}
}
