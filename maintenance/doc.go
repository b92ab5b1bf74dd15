// Package maintenance is the background work every server process runs
// beside the domain, as River keeps its rescuer and cleaners in
// internal/maintenance: the outbox's fan-out and sender (outbox.go), the
// sweeper (sweep.go: expiry, stale-claim tickets, reminders and
// escalations) and the audit chain's sealer (seal.go). The rules stay in
// queue, audit and the stores' conditional statements, so any number of
// processes may run all of it on one database.
package maintenance

import (
	"time"

	"github.com/approvals/approvals/classify"
)

// Service is what the background work needs of the queue.Service it runs
// beside: the service clock and the tools in force.
type Service interface {
	Now() time.Time
	Registry() *classify.Registry
}
