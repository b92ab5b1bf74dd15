package queue_test

import (
	"context"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// TestSubmitRefusesNonObjectPayload: the Service refuses a payload that is
// not exactly one JSON object, whether or not the tool reads the payload's
// value (an unregistered tool has no schema or template, so the Service
// checks without decoding), and stores nothing.
func TestSubmitRefusesNonObjectPayload(t *testing.T) {
	t.Parallel()
	e := apptest.DomainEnv(t, testclock.Frozen())
	ctx := context.Background()
	for _, tool := range []string{"send_customer_email", "not_registered_anywhere"} {
		for _, payload := range []string{``, `[1]`, `"x"`, `null`, `{`, `{"a":1} {"b":2}`, `{"a":1} x`, ` 1`} {
			_, err := e.Service.Submit(ctx, queue.SubmitRequest{Tool: tool, Payload: []byte(payload), Agent: "bot", IntentKey: "k:1"})
			if queue.ErrorCode(err) != queue.CodeInvalidRequest {
				t.Errorf("tool %s, payload %q: err=%v, want invalid_request", tool, payload, err)
			}
		}
	}
	list, _, err := e.Service.List(ctx, queue.ListRequest{})
	if err != nil || len(list) != 0 {
		t.Errorf("stored %d actions (%v), want none", len(list), err)
	}
	// Both paths accept an object with surrounding white space.
	for _, tool := range []string{"send_customer_email", "not_registered_anywhere"} {
		key := "k:" + tool
		if tool == "send_customer_email" {
			key = "" // derived from the payload
		}
		res, err := e.Service.Submit(ctx, queue.SubmitRequest{Tool: tool, Agent: "bot", IntentKey: key,
			Payload: []byte(" {\"customer_id\": \"c-1\", \"topic\": \"t\"}\n")})
		if err != nil || !res.Created {
			t.Errorf("tool %s, object payload: created=%v err=%v", tool, res.Created, err)
		}
	}
}
