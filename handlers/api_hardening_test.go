package handlers_test

import (
	"context"
	"io"
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

// TestNumbersAndDepthRefused: a number with more than 100 significant
// digits or an exponent beyond ±400, or objects and arrays nested deeper
// than 64 (counted from the body's outermost value), is 400 invalid_request
// naming where, in a submission and in a result; nothing is stored, and the
// action whose result was refused stays in progress. On both stores.
func TestNumbersAndDepthRefused(t *testing.T) {
	t.Parallel()
	// The body is depth 1 and the payload depth 2, so a payload may hold
	// 62 more levels.
	nest := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			cases := []struct{ name, body, mention string }{
				{"exponent", `{"tool":"post_partner_message","intent_key":"p:n1","payload":{"n":1e999999}}`, "/payload/n"},
				{"digits", `{"tool":"post_partner_message","intent_key":"p:n2","payload":{"n":` + strings.Repeat("7", 101) + `}}`, "100 significant digits"},
				{"depth", `{"tool":"post_partner_message","intent_key":"p:n3","payload":{"a":` + nest(63) + `}}`, "deeper than 64"},
				// Refused before the schema's exclusiveMinimum would compare it.
				{"schema number", `{"tool":"issue_refund","payload":{"order_id":"o1","line_id":1,"amount":1e999999}}`, "/payload/amount"},
			}
			for _, tc := range cases {
				r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", tc.body)
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest ||
					!strings.Contains(r.Problem(t).Detail, tc.mention) {
					t.Errorf("%s: %d %s, want 400 invalid_request naming %s", tc.name, r.Status, r.Body, tc.mention)
				}
			}
			// At the limits it is accepted.
			ok := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions",
				`{"tool":"post_partner_message","intent_key":"p:n4","payload":{"n":1e400,"a":`+nest(62)+`}}`)
			if ok.Status != http.StatusCreated {
				t.Fatalf("at the limits: %d %s, want 201", ok.Status, ok.Body)
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 {
				t.Fatalf("%d actions stored, want only the one at the limits", len(list))
			}

			a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-num", 3)).Action(t)
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"amount":1e-999}}`)
			if r.Status != http.StatusBadRequest || !strings.Contains(r.Problem(t).Detail, "/result/amount") {
				t.Fatalf("complete with a number out of range: %d %s, want 400 naming /result/amount", r.Status, r.Body)
			}
			got := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID, nil).Action(t)
			if got.State != queue.StateInProgress {
				t.Fatalf("after a refused result the action is %s, want in_progress", got.State)
			}
		})
	}
}

// TestUnknownQueryParametersRefused: every agent endpoint refuses a query
// parameter it does not read (400 invalid_request naming it) and does
// nothing, so a parameter of a newer client (?dry_run=true on any other
// endpoint) is never a real submission or claim; the parameters each
// endpoint reads still work, and a bad token
// is still 401 first. On both stores.
func TestUnknownQueryParametersRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			submit := apptest.RefundBody("o-query", 1)
			held := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-held", 1)).Action(t)
			cases := []struct{ method, path, param string }{
				{"POST", "/api/v1/actions?dry-run=true", "dry-run"},
				{"POST", "/api/v1/actions?dry_run=true&dry_run=true", "dry_run"},
				{"GET", "/api/v1/actions?intent_key=k&dry_run=1", "dry_run"},
				{"GET", "/api/v1/actions/" + held.ID + "?wait=1s&until=done", "until"},
				{"GET", "/api/v1/actions/" + held.ID + "?wait=1s&wait=2s", "wait"},
				{"GET", "/api/v1/tools?verbose=1", "verbose"},
				{"POST", "/api/v1/actions/" + held.ID + "/complete?dry_run=true", "dry_run"},
				{"POST", "/api/v1/actions/" + held.ID + "/fail?force=1", "force"},
				{"POST", "/api/v1/actions/" + held.ID + "/cancel?dry_run=true", "dry_run"},
				{"POST", "/api/v1/actions/" + held.ID + "/execute?dry_run=true", "dry_run"},
			}
			for _, tc := range cases {
				var body any
				switch {
				case strings.HasPrefix(tc.path, "/api/v1/actions?"):
					body = submit
				case strings.Contains(tc.path, "/complete"):
					body = `{"result":{"refund":"re_1"}}`
				case strings.Contains(tc.path, "/fail"):
					body = `{"error":"declined"}`
				}
				if tc.method == "GET" {
					body = nil
				}
				r := e.Do(e.URL, e.AgentToken, tc.method, tc.path, body)
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest || !strings.Contains(r.Problem(t).Detail, `"`+tc.param+`"`) {
					t.Errorf("%s %s: %d %s, want 400 invalid_request naming %s", tc.method, tc.path, r.Status, r.Body, tc.param)
				}
			}
			if r := e.Do(e.URL, "not-a-token", "POST", "/api/v1/actions?dry-run=true", submit); r.Status != http.StatusUnauthorized {
				t.Fatalf("a bad token with an unknown parameter: %d, want 401", r.Status)
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].ID != held.ID || list[0].State != queue.StateInProgress {
				t.Fatalf("after refused calls: %d actions (%v), want only %s still in_progress", len(list), list, held.ID)
			}
			for _, path := range []string{"/api/v1/actions/" + held.ID + "?wait=10ms&state=in_progress", "/api/v1/actions?intent_key=refund:o-held:1&state=in_progress&tool=issue_refund&limit=5"} {
				if r := e.Do(e.URL, e.AgentToken, "GET", path, nil); r.Status != http.StatusOK {
					t.Errorf("GET %s: %d %s, want 200", path, r.Status, r.Body)
				}
			}
		})
	}
}

// TestCaseTwinKeysRefused: a payload key that differs only in case from a
// field the tool's schema names ("To" beside "to") is 422 invalid_payload
// naming it, and nothing is stored. On both stores.
func TestCaseTwinKeysRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			body := apptest.EmailBody("c-twin", "t")
			body["payload"].(map[string]any)["To"] = "evil@example.com"
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body)
			if r.Status != http.StatusUnprocessableEntity || r.Problem(t).Code != queue.CodeInvalidPayload || !strings.Contains(r.Problem(t).Detail, `"To"`) {
				t.Fatalf("%d %s, want 422 invalid_payload naming To", r.Status, r.Body)
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil || len(list) != 0 {
				t.Fatalf("%d actions stored (%v), want none", len(list), err)
			}
		})
	}
}

// invisibleKeyCharacters are the characters the intent key tests try: four
// that unicode.IsPrint took for printable (a Hangul filler, the Hangul
// choseong filler, the combining grapheme joiner and a variation selector
// of the supplement) and four format characters refused before as
// non-printable, each with the code point a refusal names.
var invisibleKeyCharacters = []struct {
	char, code string
}{
	{"\u3164", "U+3164"}, {"\u115f", "U+115F"}, {"\u034f", "U+034F"}, {"\U000E0101", "U+E0101"},
	{"\u200b", "U+200B"}, {"\u202e", "U+202E"}, {"\ufeff", "U+FEFF"}, {"\U000E0041", "U+E0041"},
}

// TestInvisibleIntentKeysRefused: an intent key with an invisible character
// is 400 invalid_request naming the character and its position, whether
// the agent supplies it (the body's intent_key, the Idempotency-Key header
// an SDK may send, a dry run) or the tool's intent template renders it from
// the payload; nothing is stored. On both stores.
func TestInvisibleIntentKeysRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			refused := func(what string, r apptest.Resp, mention string) {
				t.Helper()
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest ||
					!strings.Contains(r.Problem(t).Detail, mention) {
					t.Errorf("%s: %d %s, want 400 invalid_request naming %s", what, r.Status, r.Body, mention)
				}
			}
			for _, c := range invisibleKeyCharacters {
				// Supplied: "partner:" is 8 characters, so the character is the 9th.
				body := map[string]any{"tool": "post_partner_message", "intent_key": "partner:" + c.char + "42", "payload": map[string]any{"text": "hi"}}
				refused("intent_key "+c.code, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body),
					"invisible character ("+c.code+") at character 9")
				refused("dry run "+c.code, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", body),
					"invisible character ("+c.code+") at character 9")
				refused("Idempotency-Key "+c.code, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions",
					`{"tool":"post_partner_message","payload":{"text":"hi"}}`, "Idempotency-Key", c.char+"partner:42"),
					"invisible character ("+c.code+") at character 1")
				// Rendered by email:{customer_id}:{topic}: "email:c-" is 8
				// characters, so the character is the 9th of the key.
				derived := apptest.EmailBody("c-"+c.char, "welcome")
				refused("rendered key "+c.code, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", derived),
					"invisible character ("+c.code+") at character 9")
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Fatalf("%d actions stored from refused submissions", len(list))
			}
			// A visible non-ASCII key is still a key.
			ok := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions",
				map[string]any{"tool": "post_partner_message", "intent_key": "partner:Zoë:\u2764", "payload": map[string]any{"text": "hi"}})
			if ok.Status != http.StatusCreated || ok.Action(t).IntentKey != "partner:Zoë:\u2764" {
				t.Fatalf("visible non-ASCII key: %d %s, want 201", ok.Status, ok.Body)
			}
		})
	}
}

// TestQueryTextRefused: a query parameter holding a NUL character or bytes
// that are not UTF-8 is 400 invalid_request naming it, never a 5xx
// (PostgreSQL refuses both in a filter), on both stores.
func TestQueryTextRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			held := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-text", 1)).Action(t)
			cases := []struct{ path, param string }{
				{"/api/v1/actions?intent_key=refund%00", "intent_key"},
				{"/api/v1/actions?tool=%ff", "tool"},
				{"/api/v1/actions?intent_key=%C0%80", "intent_key"},
				{"/api/v1/actions/" + held.ID + "?wait=1s&state=in%00progress", "state"},
			}
			for _, tc := range cases {
				r := e.Do(e.URL, e.AgentToken, "GET", tc.path, nil)
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest || !strings.Contains(r.Problem(t).Detail, `"`+tc.param+`"`) {
					t.Errorf("GET %s: %d %s, want 400 invalid_request naming %s", tc.path, r.Status, r.Body, tc.param)
				}
			}
		})
	}
}

// TestEmptyDryRunRefused: dry_run given without a value (?dry_run, a flag
// to many clients, or ?dry_run=) is 400 invalid_request naming it, not a
// real submission or plan: whoever wrote it asked for something, and
// refusing is the only answer that writes nothing by mistake. On both
// stores.
func TestEmptyDryRunRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			plan := map[string]any{"title": "t", "steps": []any{map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"path": "/a"}}}}
			for _, path := range []string{"/api/v1/actions?dry_run", "/api/v1/actions?dry_run=", "/api/v1/plans?dry_run", "/api/v1/plans?dry_run="} {
				var body any = apptest.RefundBody("o-dry", 1)
				if strings.HasPrefix(path, "/api/v1/plans") {
					body = plan
				}
				r := e.Do(e.URL, e.AgentToken, "POST", path, body)
				if r.Status != http.StatusBadRequest || r.Problem(t).Code != queue.CodeInvalidRequest || !strings.Contains(r.Problem(t).Detail, "dry_run") {
					t.Errorf("POST %s: %d %s, want 400 invalid_request naming dry_run", path, r.Status, r.Body)
				}
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Fatalf("%d actions stored by requests that asked for a dry run", len(list))
			}
			if r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans", nil); !strings.Contains(string(r.Body), `"plans":[]`) {
				t.Fatalf("plans stored by requests that asked for a dry run: %s", r.Body)
			}
		})
	}
}

// TestTwoIdempotencyKeysRefused: two Idempotency-Key headers name two
// intents, as a header and a body key that differ do: 400 invalid_request
// naming the header, and nothing is stored (the first one was taken). On
// both stores.
func TestTwoIdempotencyKeysRefused(t *testing.T) {
	t.Parallel()
	for _, st := range apptest.APIStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			e := st.Start(t)
			req, err := http.NewRequest("POST", e.URL+"/api/v1/actions", strings.NewReader(`{"tool":"unlisted_mailer","payload":{"x":1}}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+e.AgentToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Add("Idempotency-Key", "partner:1:hello")
			req.Header.Add("Idempotency-Key", "partner:2:hello")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_request") || !strings.Contains(string(body), "Idempotency-Key") {
				t.Fatalf("two Idempotency-Key headers: %d %s, want 400 invalid_request naming the header", res.StatusCode, body)
			}
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Fatalf("%d actions stored, the first under %q", len(list), list[0].IntentKey)
			}
		})
	}
}
