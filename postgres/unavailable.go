package postgres

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable implements queue.UnavailableClassifier: err says the database
// could not be reached or took no writes, which a caller meets during a
// failover and may try again after (docs/operations.md, "Replication and
// failover"). It looks at the error alone, never at the database, so a
// request that failed against the old primary is answered unavailable even
// when a ping would already reach the new one.
func (s *Store) Unavailable(err error) bool { return unavailable(err) }

func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "25006": // read-only transaction: a standby, or a primary demoted
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, errReadOnly), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx says a statement never reached the server (a connection lost
	// before it was sent).
	return pgconn.SafeToRetry(err)
}
