// Package problem is the one place where a domain error becomes an HTTP
// answer, as WTF Dial keeps its code → status map in its http package:
// Status maps every queue.Code to a status, and Write sends the RFC 9457
// problem details that the REST API and the MCP endpoint answer with (the
// dashboard renders the same status as a page).
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/approvals/approvals/queue"
)

// Details is an RFC 9457 problem details body.
type Details struct {
	Type   string     `json:"type"`
	Title  string     `json:"title"`
	Status int        `json:"status"`
	Detail string     `json:"detail"`
	Code   queue.Code `json:"code"`
	// Guidance says what to do next after a refusal an agent meets (Guidance).
	Guidance string        `json:"guidance,omitempty"`
	Action   *queue.Action `json:"action,omitempty"`
}

// Status is the status a code answers over HTTP.
func Status(c queue.Code) int {
	switch c {
	case queue.CodeInvalidRequest, queue.CodeIntentKeyRequired:
		return http.StatusBadRequest
	case queue.CodeUnauthorized:
		return http.StatusUnauthorized
	case queue.CodeForbidden:
		return http.StatusForbidden
	case queue.CodeNotFound, queue.CodeNoVerifier:
		return http.StatusNotFound
	case queue.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case queue.CodeInProgress, queue.CodeInvalidTransition, queue.CodeOutcomeConflict, queue.CodeAlreadyDecided,
		queue.CodeTicketResolved, queue.CodeUpstreamUnavailable, queue.CodeIntentUnderReview,
		queue.CodeStepNotReady, queue.CodePlanNotApproved: // a refusal, not a failure of approvals: never a 5xx
		return http.StatusConflict
	case queue.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case queue.CodeInvalidPayload, queue.CodeIntentKeyMismatch, queue.CodeIntentKeyReused, queue.CodeNotInPlan:
		return http.StatusUnprocessableEntity
	case queue.CodeTooManyWaiters, queue.CodeTooManyUpstreamCalls, queue.CodeTooManyChecks:
		return http.StatusTooManyRequests
	case queue.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Write answers e as application/problem+json with its status, saying how
// to authenticate after a 401 and when to look again at an action in
// progress.
func Write(w http.ResponseWriter, e *queue.Error) error {
	status := Status(e.Code)
	if e.Code == queue.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="approvals"`)
	}
	if d := queue.ErrorRetryAfter(e); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.Seconds())))
	}
	p := Details{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: e.Detail, Code: e.Code, Guidance: Guidance(e.Code, FaceREST), Action: e.Action}
	if p.Title == "" {
		p.Title = "Error"
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(p)
}
