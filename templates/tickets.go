package templates

import (
	"time"

	"github.com/approvals/approvals/queue"
)

// TicketsView is the list of reconciliation tickets.
type TicketsView struct {
	Now        time.Time
	State      string // open, resolved or "" for all
	Tickets    []TicketRow
	CanResolve bool
	CSRF       string
	// ShowURLPaths shows URLs whose path is a credential whole (admins).
	ShowURLPaths bool
}

// TicketRow is a ticket with its action.
type TicketRow struct {
	Ticket *queue.Ticket
	Action *queue.Action // nil if it could not be read
	Form   ResolveForm
	// Notice confirms what this request did.
	Notice string
}

// ResolveForm keeps what was typed when a resolution is refused.
type ResolveForm struct {
	Outcome string
	Note    string
	Result  string
	Error   string
}

func ticketURL(id string) string { return "/tickets/" + id + "/resolve" }
