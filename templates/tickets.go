package templates

import (
	"time"

	"github.com/approvals/approvals/classify"
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
	// Title is the action's preview headline.
	Title string
	Form  ResolveForm
	// Notice confirms what this request did.
	Notice string
	// Conflict says what contradicted what, on a conflict ticket.
	Conflict *ConflictView
	// Newer is the newest later attempt of the intent, if any.
	Newer *queue.Action
	// Verifier says the action's tool has a verifier (section 18), whose
	// checks are listed newest first; Suggested is the latest check's
	// proof (done or not_done) that a person may accept with one click.
	Verifier  bool
	Checks    []VerifyCheckView
	Suggested *VerifyCheckView
	// NextCheck is when the sweep asks the verifier again, while its
	// answers prove nothing (nil: not scheduled).
	NextCheck *time.Time
}

// VerifyCheckView is one check of a verifier, as its verified event says.
type VerifyCheckView struct {
	Verdict, Reason string
	At              time.Time
	// Answer is the system of record's answer, pretty-printed; Result what
	// a done verdict would store.
	Answer, Result string
	// Outcome is the ticket outcome the verdict proves (done or failed), and
	// Note the prefilled note of "Resolve as verified".
	Outcome, Note string
	// ResultJSON is Result as compact JSON, for the form.
	ResultJSON string
}

// ConflictView is a report that contradicted the stored outcome, and what
// had settled the action before it.
type ConflictView struct {
	// Reporter reported Report ("complete", "fail", "done", "failed") at
	// At, with Error or Result; the action was Stored.
	Reporter, Report, Stored, Error, Result string
	At                                      time.Time
	// SettledBy settled the action (SettledKind: ticket_resolved,
	// completed, failed) at SettledAt, with SettledNote.
	SettledBy, SettledKind, SettledNote string
	SettledAt                           time.Time
}

// ticketPayload is what the ticket's action sent, or was approved to send.
func ticketPayload(a *queue.Action) string {
	if len(a.ApprovedPayload) > 0 {
		return PrettyJSON(a.ApprovedPayload)
	}
	return PrettyJSON(a.Payload)
}

// ticketVerifierAsking says an open ticket is a verifier's to settle yet:
// a stale claim whose tool's verifier has proved nothing so far (the sweep
// asks again). Any other open ticket waits for a person: a conflict, a
// tool without a verifier, or a proof a person accepts.
func ticketVerifierAsking(t TicketRow) bool {
	return t.Verifier && t.Ticket.Kind == queue.TicketStale && t.Suggested == nil
}

// ticketKindHelp explains a ticket's kind in words.
func ticketKindHelp(t TicketRow) string {
	switch t.Ticket.Kind {
	case queue.TicketStale:
		s := "Stale: the action was claimed and no outcome came back within its tool's claim timeout"
		if t.Action != nil {
			s += " (" + classify.FormatDuration(t.Action.Spec.ClaimTimeout) + ")"
		}
		return s + ". Nobody knows whether the effect happened, and approvals never sends it again by itself."
	case queue.TicketConflict:
		return "Conflict: a report contradicted the outcome already stored. The effect may have happened twice, or not at all."
	}
	return ""
}

// ResolveForm keeps what was typed when a resolution is refused.
type ResolveForm struct {
	Outcome string
	Note    string
	Result  string
	Error   string
}

func ticketURL(id string) string { return "/tickets/" + id + "/resolve" }
