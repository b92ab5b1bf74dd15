package postgres_test

import (
	"testing"

	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/storetest"
)

// TestConformance runs the store conformance suite against PostgreSQL,
// each subtest in its own schema.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) storage.Store { return pgtest.Open(t) })
}
