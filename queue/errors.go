package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Code is a machine-readable error code. Every face reports it as it is
// (the REST problem's code, the MCP refusal's code); the web face maps it
// to an HTTP status in one place (problem).
type Code string

const (
	CodeInvalidRequest    Code = "invalid_request"
	CodeInvalidPayload    Code = "invalid_payload"
	CodeIntentKeyRequired Code = "intent_key_required"
	CodeIntentKeyMismatch Code = "intent_key_mismatch"
	CodeIntentKeyReused   Code = "intent_key_reused"
	CodeInProgress        Code = "in_progress"
	CodeInvalidTransition Code = "invalid_transition"
	CodeOutcomeConflict   Code = "outcome_conflict"
	CodeAlreadyDecided    Code = "already_decided"
	CodeNotFound          Code = "not_found"
	CodeForbidden         Code = "forbidden"
	CodeUnauthorized      Code = "unauthorized"
	CodePayloadTooLarge   Code = "payload_too_large"
	CodeTicketResolved    Code = "ticket_resolved"
	// CodeIntentUnderReview: a conflict ticket is open on the intent's
	// latest attempt (its effect may have happened twice); nothing was
	// claimed until an operator resolves it.
	CodeIntentUnderReview Code = "intent_under_review"
	// CodeNotInPlan: a submission naming a plan equals none of its unused
	// steps; nothing was stored.
	CodeNotInPlan Code = "not_in_plan"
	// CodeStepNotReady: an ordered plan's step waits for an earlier one.
	CodeStepNotReady Code = "step_not_ready"
	// CodePlanNotApproved: the plan named is not approved (pending,
	// rejected, expired, done, …), so it lets no new step through.
	CodePlanNotApproved Code = "plan_not_approved"
	CodeUnavailable     Code = "unavailable"
	// CodeNoVerifier: the action's tool has no verifier (section 18), so
	// nothing can be asked about it.
	CodeNoVerifier Code = "no_verifier"
	// CodeTooManyChecks: the action's verifier was asked less than
	// VerifyAgentInterval ago; ask again after Retry-After.
	CodeTooManyChecks Code = "too_many_checks"
	// CodeUpstreamUnavailable: the tool's upstream MCP server cannot be
	// reached or no longer lists the tool; nothing was done.
	CodeUpstreamUnavailable Code = "upstream_unavailable"
	// CodeInternal is an unexpected failure with storage reachable: a bug.
	// Its detail reveals nothing; the error itself is logged.
	CodeInternal Code = "internal"
	// CodeMethodNotAllowed is an HTTP method a route does not serve.
	CodeMethodNotAllowed Code = "method_not_allowed"
)

// Error is the one error type the domain speaks. Detail is safe to show to
// the caller; Action, when set, is the existing action that explains it.
type Error struct {
	Code   Code
	Detail string
	Action *Action
	// After, when set, is this refusal's own Retry-After (when the
	// verifier's slot frees), in place of its code's.
	After time.Duration
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Detail }

// Is lets errors.Is match on the code alone, so sentinels like ErrNotFound
// match any *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && (t.Detail == "" || t.Detail == e.Detail)
	}
	return false
}

// ActionNotFound and TicketNotFound are ErrNotFound (for errors.Is) with a
// detail naming the id: every error body says what is wrong.
func ActionNotFound(id string) error { return Errorf(CodeNotFound, "action %s not found", id) }

func TicketNotFound(id string) error { return Errorf(CodeNotFound, "ticket %s not found", id) }

// Sentinels for errors.Is.
var (
	ErrNotFound = &Error{Code: CodeNotFound}
	// ErrStateMismatch is returned by Store.ActionTransition when the action
	// was not in one of the expected states; the store returns the current
	// action with it.
	ErrStateMismatch = errors.New("action is not in the expected state")
	// ErrTicketNotOpen is returned by Store.TicketResolve for a resolved ticket.
	ErrTicketNotOpen = errors.New("ticket is not open")
)

// Errorf builds an *Error with a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or "" when err is not an *Error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// CodeTooManyWaiters refuses a long-poll or event stream past the cap of
// longpoll.WaiterLimits; the web layer answers 429 with Retry-After.
const CodeTooManyWaiters Code = "too_many_waiters"

// WaiterRetryAfter is the Retry-After of a too_many_waiters answer: long
// enough for some waits to end (a long-poll lasts at most longpoll.MaxWait).
const WaiterRetryAfter = 5 * time.Second

// UnavailableRetryAfter is the Retry-After of an unavailable answer: a
// PostgreSQL failover takes seconds (a promotion, the pool's reconnect), so
// a client that waits this long between tries reaches the new primary
// after a few tries without hammering the old one.
const UnavailableRetryAfter = 2 * time.Second

// RetryAfter is how long a caller refused with code should wait before
// trying again, and 0 for a code that trying again does not cure. Every
// face sets its Retry-After from here.
func RetryAfter(code Code) time.Duration {
	switch code {
	case CodeUnavailable:
		return UnavailableRetryAfter
	case CodeTooManyWaiters:
		return WaiterRetryAfter
	case CodeTooManyUpstreamCalls:
		return UpstreamRetryAfter
	case CodeInProgress:
		return InProgressRetryAfter
	case CodeTooManyChecks:
		return VerifyAgentInterval
	}
	return 0
}

// ErrorRetryAfter is how long the caller refused with e should wait: its
// own After when set, else its code's (RetryAfter). A part of a second
// counts as a whole one, so a caller that waits it is not refused again.
func ErrorRetryAfter(e *Error) time.Duration {
	if e.After > 0 {
		return (e.After + time.Second - 1).Truncate(time.Second)
	}
	return RetryAfter(e.Code)
}

// InProgressRetryAfter is when to look again at an action in progress.
const InProgressRetryAfter = 5 * time.Second

// Pinger is the storage ErrorOf asks whether it answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// UnavailableClassifier is a storage that can tell from an error alone that
// the database could not be reached or took no writes (a lost connection,
// a server shutting down, a standby not yet promoted). ErrorOf answers such
// an error unavailable without asking the database again: during a
// failover the ping after it may already reach the new primary, and a
// request refused for the outage must still be told to try again, not that
// something broke.
type UnavailableClassifier interface {
	Unavailable(err error) bool
}

// pingTimeout bounds the storage check of ErrorOf.
const pingTimeout = 2 * time.Second

// ErrorOf turns any error into a domain error, the one classification
// every face (REST, dashboard, MCP) uses. A domain error is returned as it
// is. Anything else is unexpected and logged here, once, with attrs: it is
// unavailable when the storage says the error is an outage
// (UnavailableClassifier) or does not answer a ping (the caller may try
// again; a database that answers read-only, a standby mid-failover, fails
// the ping too), internal otherwise. Neither detail reveals SQL, stack traces or
// identifiers. The ping has its own short deadline, because the caller's
// context may be spent by the failure being classified. log nil is
// slog.Default().
func ErrorOf(ctx context.Context, err error, storage Pinger, log *slog.Logger, attrs ...any) *Error {
	var qe *Error
	if errors.As(err, &qe) {
		return qe
	}
	if log == nil {
		log = slog.Default()
	}
	if u, ok := storage.(UnavailableClassifier); ok && u.Unavailable(err) {
		log.WarnContext(ctx, "storage unavailable", append(attrs, "err", err)...)
		return &Error{Code: CodeUnavailable, Detail: "storage is unavailable; try again"}
	}
	log.ErrorContext(ctx, "unexpected error", append(attrs, "err", err)...)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	if storage.Ping(pctx) != nil {
		return &Error{Code: CodeUnavailable, Detail: "storage is unavailable; try again"}
	}
	return &Error{Code: CodeInternal, Detail: "internal error; it has been logged"}
}
