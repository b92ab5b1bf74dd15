package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/approvals/approvals/queue"
)

func TestUUIDOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		valid bool
		bytes [16]byte
	}{
		{"0190c1f2-7a3b-7cde-8f00-112233445566", true,
			[16]byte{0x01, 0x90, 0xc1, 0xf2, 0x7a, 0x3b, 0x7c, 0xde, 0x8f, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66}},
		{"0190C1F2-7A3B-7CDE-8F00-112233445566", true,
			[16]byte{0x01, 0x90, 0xc1, 0xf2, 0x7a, 0x3b, 0x7c, 0xde, 0x8f, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66}},
		{"", false, [16]byte{}},
		{"0190c1f27a3b7cde8f00112233445566", false, [16]byte{}},      // no dashes
		{"0190c1f2-7a3b-7cde-8f00-11223344556", false, [16]byte{}},   // short
		{"0190c1f2-7a3b-7cde-8f00-1122334455667", false, [16]byte{}}, // long
		{"0190c1f2-7a3b-7cde-8f00-11223344556g", false, [16]byte{}},  // not hex
		{"0190c1f2+7a3b-7cde-8f00-112233445566", false, [16]byte{}},  // dash misplaced
	} {
		got := uuidOf(tc.in)
		if got.Valid != tc.valid || got.Bytes != tc.bytes {
			t.Errorf("uuidOf(%q) = %v %x, want %v %x", tc.in, got.Valid, got.Bytes, tc.valid, tc.bytes)
		}
	}
}

// TestUUIDArrayEncodesInBinary holds what uuidArray is for: pgx encodes it
// as uuid[] in binary at once, where a []string fails that format first.
func TestUUIDArrayEncodesInBinary(t *testing.T) {
	t.Parallel()
	m := pgtype.NewMap()
	ids := []string{queue.NewID(time.Now()), queue.NewID(time.Now())}
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, uuidArray(ids), nil); err != nil {
		t.Fatalf("uuidArray in binary: %v", err)
	}
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil); err == nil {
		t.Fatal("pgx now encodes a []string as uuid[] in binary: uuidArray may be no longer needed")
	}
	for i, u := range uuidArray(ids) {
		var back pgtype.UUID
		if err := back.Scan(ids[i]); err != nil || back != u {
			t.Errorf("uuidArray(%q) = %x, pgx parses it as %x (%v)", ids[i], u.Bytes, back.Bytes, err)
		}
	}
}
