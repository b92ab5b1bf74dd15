package handlers_test

import (
	"encoding/json"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestEditedFieldsInAPI: the action resource names the fields an approver
// edited (RFC 6901 pointers, validated against the OpenAPI document by the
// harness), null for an action approved as submitted, on both stores.
func TestEditedFieldsInAPI(t *testing.T) {
	t.Parallel()
	for _, store := range apptest.APIStores {
		t.Run(store.Name, func(t *testing.T) {
			t.Parallel()
			e := store.Start(t)
			for _, tc := range []struct {
				customer, edit, want string
			}{
				{"c-e1", `{"customer_id":"c-e1","topic":"x","to":"c@example.com","subject":"Hello (edited)","body":"Hi there, Sam"}`, `["/body","/subject"]`},
				{"c-e2", ``, `null`},
				{"c-e3", `{"body":"Hi there","subject":"Hello","to":"c@example.com","topic":"x","customer_id":"c-e3"}`, `null`},
			} {
				a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody(tc.customer, "x")).Action(t)
				if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com",
					Payload: json.RawMessage(tc.edit)}); err != nil {
					t.Fatal(err)
				}
				r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID, nil)
				var got struct {
					EditedFields json.RawMessage `json:"edited_fields"`
				}
				if err := json.Unmarshal(r.Body, &got); err != nil || string(got.EditedFields) != tc.want {
					t.Errorf("%s: edited_fields = %s (%v), want %s; body %s", tc.customer, got.EditedFields, err, tc.want, r.Body)
				}
			}
		})
	}
}
