package handlers_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDuplicateKeysRefused: an object naming a key twice is refused with
// 400 invalid_request naming the key, and nothing is stored, on both
// stores; a result with a duplicate leaves the action in progress.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			cases := []struct{ name, path, body, mention string }{
				{"payload key", "/api/v1/actions",
					`{"tool":"send_customer_email","payload":{"customer_id":"c1","topic":"t","to":"a@example.com","to":"evil@example.com","subject":"s","body":"b"}}`,
					`"to" at /payload/to`},
				{"nested key", "/api/v1/actions",
					`{"tool":"post_partner_message","intent_key":"p:1","payload":{"msg":{"text":"a","text":"b"}}}`,
					`/payload/msg/text`},
				{"body field", "/api/v1/actions",
					`{"tool":"issue_refund","tool":"send_customer_email","payload":{"order_id":"o1","line_id":1,"amount":1}}`,
					`"tool"`},
			}
			for _, tc := range cases {
				r := e.Do(e.URL, e.AgentToken, "POST", tc.path, tc.body)
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest ||
					!strings.Contains(r.Problem(t).Detail, tc.mention) {
					t.Errorf("%s: %d %s, want 400 invalid_request naming %s", tc.name, r.Status, r.Body, tc.mention)
				}
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Fatalf("%d actions stored from refused submissions", len(list))
			}

			a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-dup", 3)).Action(t)
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"r1","id":"r2"}}`)
			if r.Status != http.StatusBadRequest || !strings.Contains(r.Problem(t).Detail, `/result/id`) {
				t.Fatalf("complete with a duplicate: %d %s, want 400 naming /result/id", r.Status, r.Body)
			}
			got := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID, nil).Action(t)
			if got.State != queue.StateInProgress {
				t.Fatalf("after a refused result the action is %s, want in_progress", got.State)
			}
		})
	}
}

// TestInvisibleCharactersWarned: a payload string with a bidirectional
// control or zero-width character gets the warning invisible_characters,
// on both stores, written as itself or escaped; a plain one does not.
func TestInvisibleCharactersWarned(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			cases := []struct {
				name, body string
				want       bool
			}{
				{"plain", "Your refund is on its way.", false},
				{"override", "Your refund of \u202e05€ is on its way.", true},
				{"zero-width space", "Sign in as ad\u200bmin.", true},
			}
			for i, tc := range cases {
				body := apptest.EmailBody("c-inv-"+string(rune('a'+i)), "t")
				body["payload"].(map[string]any)["body"] = tc.body
				a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body).Action(t)
				if got := slices.Contains(a.Warnings, queue.WarningInvisibleCharacters); got != tc.want {
					t.Errorf("%s: warnings %v, want invisible_characters %v", tc.name, a.Warnings, tc.want)
				}
			}
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions",
				`{"tool":"post_partner_message","intent_key":"p:esc","payload":{"text":"a\u2067b"}}`)
			if a := r.Action(t); !slices.Contains(a.Warnings, queue.WarningInvisibleCharacters) {
				t.Fatalf("escaped isolate: warnings %v, want invisible_characters", a.Warnings)
			}
		})
	}
}
