package postgres

import (
	"encoding/hex"

	"github.com/jackc/pgx/v5/pgtype"
)

// uuidArray is ids as a uuid[] parameter. Given a []string, pgx tries
// uuid[]'s binary format first, fails (its uuid codec takes no string),
// builds that error with fmt and reflection, and only then encodes the
// array as text for PostgreSQL to parse: once for every batch statement,
// which the submissions' CPU profile showed. These values go out in binary
// at once. Each id has the layout of queue.NewID's (queue.ValidID: the
// callers check or made it); one that does not becomes NULL, which matches
// no row, as no row has an id that is not a UUID.
func uuidArray(ids []string) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = uuidOf(id)
	}
	return out
}

// uuidOf parses a UUID in its 8-4-4-4-12 text form; anything else is not
// Valid (SQL NULL).
func uuidOf(s string) pgtype.UUID {
	var u pgtype.UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u
	}
	var digits [32]byte
	n := copy(digits[:], s[0:8])
	n += copy(digits[n:], s[9:13])
	n += copy(digits[n:], s[14:18])
	n += copy(digits[n:], s[19:23])
	copy(digits[n:], s[24:36])
	if _, err := hex.Decode(u.Bytes[:], digits[:]); err != nil {
		return pgtype.UUID{}
	}
	u.Valid = true
	return u
}
