package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/approvals/approvals/queue"
)

// TestEditedFieldsThroughMCP: structuredContent carries edited_fields, the
// same JSON as the REST resource: the fields the approver changed.
func TestEditedFieldsThroughMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "mailer"))
	args := map[string]any{"customer_id": 43, "topic": "late-delivery", "to": "c43@example.com",
		"subject": "Your order", "body": "It ships today."}
	a := wantAction(t, call(t, cs, "send_customer_email", args), queue.StatePending)
	edit := `{"customer_id":43,"topic":"late-delivery","to":"c43@example.com","subject":"Your order 43","body":"It ships today."}`
	if _, err := e.svc.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ops@example.com",
		Payload: json.RawMessage(edit)}); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "get_action", map[string]any{"id": a.ID})
	var got struct {
		EditedFields []string `json:"edited_fields"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || len(got.EditedFields) != 1 || got.EditedFields[0] != "/subject" {
		t.Fatalf("structuredContent edited_fields = %v (%v), want [/subject]: %s", got.EditedFields, err, b)
	}
}
