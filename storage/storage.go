// Package storage names the whole storage seam in one place: what a
// database adapter (postgres, sqlite) implements, the domain's half
// (queue.Store), the accounts half (accounts.Store) and the audit chain's
// (audit.Store) over one database.
// The conformance suite (storetest) runs against every adapter, and the
// assembly (internal/app) takes one of these.
package storage

import (
	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/queue"
)

// Store is the whole of storage.
type Store interface {
	queue.Store
	accounts.Store
	audit.Store
}
