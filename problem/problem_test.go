package problem_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// Every code answers its status: refusals are 4xx, only unavailable and
// internal are 5xx.
func TestStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[queue.Code]int{
		queue.CodeInvalidRequest: 400, queue.CodeIntentKeyRequired: 400,
		queue.CodeUnauthorized: 401, queue.CodeForbidden: 403, queue.CodeNotFound: 404,
		queue.CodeMethodNotAllowed: 405,
		queue.CodeInProgress:       409, queue.CodeInvalidTransition: 409, queue.CodeOutcomeConflict: 409,
		queue.CodeAlreadyDecided: 409, queue.CodeTicketResolved: 409, queue.CodeUpstreamUnavailable: 409,
		queue.CodeIntentUnderReview: 409,
		queue.CodePayloadTooLarge:   413,
		queue.CodeInvalidPayload:    422, queue.CodeIntentKeyMismatch: 422, queue.CodeIntentKeyReused: 422,
		queue.CodeTooManyWaiters: 429, queue.CodeTooManyUpstreamCalls: 429, queue.CodeUnavailable: 503, queue.CodeInternal: 500,
		"no_such_code": 500,
	} {
		if got := problem.Status(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}

// Write sends the problem with its status, its code and the headers the
// code asks for.
func TestWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    *queue.Error
		header string
		value  string
	}{
		{queue.Errorf(queue.CodeUnauthorized, "send a token"), "WWW-Authenticate", `Bearer realm="approvals"`},
		{queue.Errorf(queue.CodeInProgress, "wait"), "Retry-After", "5"},
		{queue.Errorf(queue.CodeInvalidRequest, "bad"), "WWW-Authenticate", ""},
	} {
		w := httptest.NewRecorder()
		if err := problem.Write(w, tc.err); err != nil {
			t.Fatal(err)
		}
		var p problem.Details
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		want := problem.Status(tc.err.Code)
		if w.Code != want || p.Status != want || p.Code != tc.err.Code || p.Detail != tc.err.Detail || p.Title == "" {
			t.Errorf("%s: %d %+v", tc.err.Code, w.Code, p)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q", tc.err.Code, ct)
		}
		if got := w.Header().Get(tc.header); got != tc.value {
			t.Errorf("%s: %s %q, want %q", tc.err.Code, tc.header, got, tc.value)
		}
	}
}
