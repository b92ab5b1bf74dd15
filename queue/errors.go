package queue

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code; the web layer maps each code to an
// HTTP status in one place.
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
	CodeUnavailable       Code = "unavailable"
)

// Error is the one error type the domain speaks. Detail is safe to show to
// the caller; Action, when set, is the existing action that explains it.
type Error struct {
	Code   Code
	Detail string
	Action *Action
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
// detail naming the id, as the contract wants of every error body.
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
