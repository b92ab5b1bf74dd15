package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

func TestConcurrentSubmissionsOneIntent(t *testing.T) {
	t.Parallel()
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d servers", servers), func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{})
			bases := []string{e.URL}
			for range servers - 1 {
				bases = append(bases, e.AddServerURL())
			}
			body := apptest.EmailBody("c-100", "welcome")
			res := apptest.RunConcurrently(100, func(i int) resp {
				r, err := e.Try(bases[i%len(bases)], e.AgentToken, "POST", "/api/v1/actions", body)
				if err != nil {
					t.Error(err)
				}
				return r
			})
			created, replayed := 0, 0
			ids := map[string]bool{}
			for _, r := range res {
				switch r.Status {
				case http.StatusCreated:
					created++
				case http.StatusOK:
					replayed++
					if r.Header.Get("Idempotent-Replayed") != "true" {
						t.Errorf("200 without Idempotent-Replayed: %s", r.Body)
					}
				default:
					t.Errorf("unexpected status %d: %s", r.Status, r.Body)
				}
				if r.Status < 300 {
					ids[r.Action(t).ID] = true
				}
			}
			if created != 1 || replayed != 99 || len(ids) != 1 {
				t.Fatalf("created=%d replayed=%d distinct ids=%d; want 1, 99, 1", created, replayed, len(ids))
			}
			list := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions?intent_key=email:c-100:welcome", nil)
			var l struct{ Actions []queue.Action }
			_ = json.Unmarshal(list.Body, &l)
			if len(l.Actions) != 1 {
				t.Fatalf("stored actions for the intent: %d, want 1", len(l.Actions))
			}
		})
	}
}

func TestSubmitTable(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	revoked := e.Token(e.T, "gone")
	if err := e.Store.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "gone", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// A held intent for the reuse rows.
	held := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-1", "held"))
	if held.Status != 201 {
		t.Fatalf("setup: %d %s", held.Status, held.Body)
	}
	big := `{"tool":"send_customer_email","payload":{"customer_id":"c","topic":"t","to":"a@b.co","subject":"s","body":"` + strings.Repeat("x", 300<<10) + `"}}`
	long := strings.Repeat("k", 10<<10)
	cases := []struct {
		name   string
		token  string
		body   any
		hdr    []string
		status int
		code   string
		state  queue.State
	}{
		{"new at-most-once", e.AgentToken, apptest.EmailBody("c-2", "welcome"), nil, 201, "", queue.StatePending},
		{"new exactly-once", e.AgentToken, apptest.RefundBody("o-1", 5), nil, 201, "", queue.StateInProgress},
		{"at-least-once", e.AgentToken, `{"tool":"invalidate_cache","payload":{"path":"/a"}}`, nil, 201, "", queue.StateRecorded},
		{"at-least-once again", e.AgentToken, `{"tool":"invalidate_cache","payload":{"path":"/a"},"intent_key":"cache:/a"}`, nil, 201, "", queue.StateRecorded},
		{"replay, key order and number spelling differ", e.AgentToken, `{"payload":{"body":"Hi there","subject":"Hello","to":"c@example.com","topic":"held","customer_id":"c-1"},"tool":"send_customer_email"}`, nil, 200, "", queue.StatePending},
		{"held intent, other payload", e.AgentToken, apptest.EmailBody("c-1", "held"), nil, 0, "", ""},
		{"replay, the same text", e.AgentToken, apptest.EmailBody("c-1", "held"), nil, 200, "", queue.StatePending},
		{"held intent, other tool", e.AgentToken, `{"tool":"unlisted_mailer","payload":{"x":1},"intent_key":"email:c-1:held"}`, nil, 422, "intent_key_reused", ""},
		{"supplied key differs from derived", e.AgentToken, `{"tool":"send_customer_email","intent_key":"email:c-9:x","payload":{"customer_id":"c-3","topic":"t","to":"a@b.co","subject":"s","body":"b"}}`, nil, 422, "intent_key_mismatch", ""},
		{"no template and no key", e.AgentToken, `{"tool":"unlisted_mailer","payload":{"x":1}}`, nil, 400, "intent_key_required", ""},
		{"schema failure", e.AgentToken, `{"tool":"send_customer_email","payload":{"customer_id":"c","topic":"t"}}`, nil, 422, "invalid_payload", ""},
		{"template field of wrong type", e.AgentToken, `{"tool":"post_public_update","payload":{"channel":true,"slug":"x"}}`, nil, 422, "invalid_payload", ""},
		{"template field missing", e.AgentToken, `{"tool":"post_public_update","payload":{"channel":"news"}}`, nil, 422, "invalid_payload", ""},
		{"malformed JSON", e.AgentToken, `{"tool":`, nil, 400, "invalid_request", ""},
		{"invalid UTF-8", e.AgentToken, []byte("{\"tool\":\"x\xff\",\"payload\":{}}"), nil, 400, "invalid_request", ""},
		{"missing tool", e.AgentToken, `{"payload":{}}`, nil, 400, "invalid_request", ""},
		{"tool of wrong type", e.AgentToken, `{"tool":7,"payload":{}}`, nil, 400, "invalid_request", ""},
		{"payload not an object", e.AgentToken, `{"tool":"x","payload":[1]}`, nil, 400, "invalid_request", ""},
		{"NUL in a payload string", e.AgentToken, `{"tool":"x","intent_key":"k","payload":{"a":"b\u0000c"}}`, nil, 400, "invalid_request", ""},
		{"control character in key", e.AgentToken, `{"tool":"x","intent_key":"a\u0007b","payload":{}}`, nil, 400, "invalid_request", ""},
		{"10 KB key", e.AgentToken, `{"tool":"x","intent_key":"` + long + `","payload":{}}`, nil, 400, "invalid_request", ""},
		{"unknown field", e.AgentToken, `{"tool":"x","payload":{},"intent_key":"k","extra":1}`, nil, 400, "invalid_request", ""},
		{"header and body keys differ", e.AgentToken, `{"tool":"x","payload":{},"intent_key":"k1"}`, []string{"Idempotency-Key", "k2"}, 400, "invalid_request", ""},
		{"key in header", e.AgentToken, `{"tool":"unlisted_mailer","payload":{"x":1}}`, []string{"Idempotency-Key", "partner:42:hello"}, 201, "", queue.StatePending},
		{"body over the limit", e.AgentToken, big, nil, 413, "payload_too_large", ""},
		{"no token", "", apptest.EmailBody("c-4", "x"), nil, 401, "unauthorized", ""},
		{"bad token", "apv_nope", apptest.EmailBody("c-4", "x"), nil, 401, "unauthorized", ""},
		{"revoked token", revoked, apptest.EmailBody("c-4", "x"), nil, 401, "unauthorized", ""},
	}
	cases[5].body = map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": "c-1", "topic": "held", "to": "other@example.com", "subject": "Hello", "body": "Hi there"}}
	cases[5].status, cases[5].code = 422, "intent_key_reused"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Do(e.URL, tc.token, "POST", "/api/v1/actions", tc.body, tc.hdr...)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.code != "" {
				p := r.Problem(t)
				if string(p.Code) != tc.code || p.Detail == "" {
					t.Fatalf("code %q detail %q, want code %q", p.Code, p.Detail, tc.code)
				}
				if tc.code == "intent_key_reused" && (p.Action == nil || p.Action.IntentKey != "email:c-1:held") {
					t.Fatalf("reuse refusal must carry the holding action: %s", r.Body)
				}
				return
			}
			if got := r.Action(t).State; got != tc.state {
				t.Fatalf("state %s, want %s", got, tc.state)
			}
		})
	}
	// The held action's timeline records the replay and both refusals; a
	// refusal keeps what the other caller sent.
	evs, err := queue.Timeline(t.Context(), e.Store, held.Action(t).ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, ev := range evs {
		kinds[ev.Kind]++
		if ev.Kind == queue.EventReused && !strings.Contains(string(ev.Data), `"payload"`) {
			t.Errorf("reuse event without the refused payload: %s", ev.Data)
		}
	}
	// Two replays: one with the same text (recorded with the lookup on
	// PostgreSQL), one equal only as a JSON value (recorded by the Service).
	if kinds[queue.EventSubmitted] != 1 || kinds[queue.EventReplayed] != 2 || kinds[queue.EventReused] != 2 {
		t.Fatalf("timeline kinds %v; want 1 submitted, 2 replayed, 2 intent_key_reused", kinds)
	}
}

func TestExactlyOnceLifecycle(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	first := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-7", 12.5))
	if first.Status != 201 {
		t.Fatalf("claim: %d %s", first.Status, first.Body)
	}
	a := first.Action(t)
	if a.State != queue.StateInProgress || a.Attempt != 1 || a.ClaimedAt == nil {
		t.Fatalf("claim: %+v", a)
	}
	again := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-7", 12.50))
	if again.Status != 409 || again.Problem(t).Code != queue.CodeInProgress || again.Header.Get("Retry-After") == "" {
		t.Fatalf("mid-flight: %d %v %s", again.Status, again.Header, again.Body)
	}
	other := e.Token(e.T, "other")
	if r := e.Do(e.URL, other, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"re_1"}}`); r.Status != 403 {
		t.Fatalf("another agent completing: %d %s", r.Status, r.Body)
	}
	done := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"re_1"}}`)
	if done.Status != 200 || done.Action(t).State != queue.StateDone {
		t.Fatalf("complete: %d %s", done.Status, done.Body)
	}
	rep := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"re_1"}}`)
	if rep.Status != 200 || rep.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat complete: %d %s", rep.Status, rep.Body)
	}
	replay := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-7", 12.5))
	if replay.Status != 200 || string(replay.Action(t).Result) != `{"id": "re_1"}` && string(replay.Action(t).Result) != `{"id":"re_1"}` {
		t.Fatalf("replay after complete: %d %s", replay.Status, replay.Body)
	}
	conflict := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"re_2"}}`)
	p := conflict.Problem(t)
	if conflict.Status != 409 || p.Code != queue.CodeOutcomeConflict || p.Action.Ticket == nil || p.Action.Ticket.Kind != queue.TicketConflict {
		t.Fatalf("contradicting complete: %d %s", conflict.Status, conflict.Body)
	}
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/fail", `{"error":"declined"}`); r.Status != 409 || r.Problem(t).Code != queue.CodeOutcomeConflict {
		t.Fatalf("fail on done: %d %s", r.Status, r.Body)
	}
	final, _ := e.Store.ActionGetByID(t.Context(), a.ID)
	if final.State != queue.StateDone || !queue.JSONEqual(final.Result, []byte(`{"id":"re_1"}`)) {
		t.Fatalf("the stored outcome changed: %s %s", final.State, final.Result)
	}
}

func TestFailReleasesIntentAndOneReclaimWins(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-9", 3)).Action(t)
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/fail", `{"error":"card declined"}`); r.Status != 200 {
		t.Fatalf("fail: %d %s", r.Status, r.Body)
	}
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/fail", `{"error":"card declined"}`); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat fail: %d %s", r.Status, r.Body)
	}
	second := e.AddServerURL()
	res := apptest.RunConcurrently(40, func(i int) resp {
		base := e.URL
		if i%2 == 1 {
			base = second
		}
		r, err := e.Try(base, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-9", 3))
		if err != nil {
			t.Error(err)
		}
		return r
	})
	created := 0
	for _, r := range res {
		switch r.Status {
		case 201:
			created++
			if got := r.Action(t).Attempt; got != 2 {
				t.Errorf("new claim is attempt %d, want 2", got)
			}
		case 409:
		default:
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	}
	if created != 1 {
		t.Fatalf("%d callers won the re-claim, want exactly 1", created)
	}
}

func TestLongPollWakesAcrossServers(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	other := e.AddServerURL()
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-5", "poll")).Action(t)
	type answer struct {
		r   resp
		err error
		at  time.Time
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := e.Try(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=60s", nil)
		answered <- answer{r, err, time.Now()}
	}()
	// Cancel only once the first server holds the poll: subscribed, the
	// action read pending. Its fallback re-read (a minute) and its deadline
	// (60 s) are both later than this test waits for the answer (30 s), so
	// only the other server's notification can end it in time.
	e.App.AwaitWaiters(t, 1)
	changed := time.Now()
	if r := e.Do(other, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel through the other server: %d %s", r.Status, r.Body)
	}
	var got answer
	select {
	case got = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the long-poll did not answer within 30 s of the change")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if st := got.r.Action(t).State; st != queue.StateCancelled {
		t.Fatalf("long-poll answered %s, want cancelled", st)
	}
	// Wall-clock lag depends on the machine's load: logged, not asserted.
	t.Logf("long-poll answered %s after the change", got.at.Sub(changed))
}

func TestReadsAndDriveErrors(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-6", "x")).Action(t)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"unknown id", "GET", "/api/v1/actions/does-not-exist", nil, 404, "not_found"},
		{"unknown uuid", "GET", "/api/v1/actions/0190a0a0-0000-7000-8000-000000000000", nil, 404, "not_found"},
		{"wait too long", "GET", "/api/v1/actions/" + a.ID + "?wait=61s", nil, 400, "invalid_request"},
		{"wait not a duration", "GET", "/api/v1/actions/" + a.ID + "?wait=soon", nil, 400, "invalid_request"},
		{"bad state", "GET", "/api/v1/actions/" + a.ID + "?wait=1s&state=nope", nil, 400, "invalid_request"},
		{"limit too big", "GET", "/api/v1/actions?limit=201", nil, 400, "invalid_request"},
		{"bad cursor", "GET", "/api/v1/actions?cursor=zzz", nil, 400, "invalid_request"},
		{"execute pending", "POST", "/api/v1/actions/" + a.ID + "/execute", nil, 409, "invalid_transition"},
		{"complete pending", "POST", "/api/v1/actions/" + a.ID + "/complete", `{"result":{}}`, 409, "invalid_transition"},
		{"complete without result", "POST", "/api/v1/actions/" + a.ID + "/complete", `{}`, 400, "invalid_request"},
		{"fail without error", "POST", "/api/v1/actions/" + a.ID + "/fail", `{"error":""}`, 400, "invalid_request"},
		{"drive unknown", "POST", "/api/v1/actions/nope/cancel", nil, 404, "not_found"},
	}
	for _, tc := range cases {
		r := e.Do(e.URL, e.AgentToken, tc.method, tc.path, tc.body)
		if r.Status != tc.status || string(r.Problem(t).Code) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	// A wait on a final state answers at once.
	e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil)
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat cancel: %d %s", r.Status, r.Body)
	}
	start := time.Now()
	if r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=30s", nil); r.Action(t).State != queue.StateCancelled || time.Since(start) > 5*time.Second {
		t.Fatalf("wait on a final state: %s after %s", r.Body, time.Since(start))
	}
	// Attempt 2 after cancel, and the listing pages through both.
	b := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-6", "x")).Action(t)
	if b.Attempt != 2 {
		t.Fatalf("after cancel: attempt %d, want 2", b.Attempt)
	}
	page := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions?intent_key=email:c-6:x&limit=1", nil)
	var l struct {
		Actions    []queue.Action
		NextCursor *string `json:"next_cursor"`
	}
	_ = json.Unmarshal(page.Body, &l)
	if len(l.Actions) != 1 || l.Actions[0].ID != b.ID || l.NextCursor == nil {
		t.Fatalf("first page: %s", page.Body)
	}
	page = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions?intent_key=email:c-6:x&limit=1&cursor="+*l.NextCursor, nil)
	l.Actions, l.NextCursor = nil, nil
	_ = json.Unmarshal(page.Body, &l)
	if len(l.Actions) != 1 || l.Actions[0].ID != a.ID || l.NextCursor != nil {
		t.Fatalf("second page: %s", page.Body)
	}
	r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/tools", nil)
	var tools struct {
		Tools []struct{ Name, Class, Guidance string }
	}
	if err := json.Unmarshal(r.Body, &tools); err != nil || len(tools.Tools) != len(e.Service.Registry().Tools()) {
		t.Fatalf("tools: %d %s", r.Status, r.Body)
	}
	for _, tv := range tools.Tools {
		// The same guidance text as the MCP tool descriptions.
		want, _ := e.Service.Registry().Lookup(tv.Name)
		if tv.Class != string(want.Class) || tv.Guidance != want.Guidance() {
			t.Errorf("tool %s: class %q guidance %q; want %q %q", tv.Name, tv.Class, tv.Guidance, want.Class, want.Guidance())
		}
	}
}

func TestAgentExecutesApprovedActionOnce(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-8", "x")).Action(t)
	edited := `{"customer_id":"c-8","topic":"x","to":"c@example.com","subject":"Hello (edited)","body":"Hi there"}`
	if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com", Payload: json.RawMessage(edited)}); err != nil {
		t.Fatal(err)
	}
	res := apptest.RunConcurrently(10, func(int) resp {
		r, err := e.Try(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/execute", nil)
		if err != nil {
			t.Error(err) // a transport error or a response the OpenAPI document does not allow
		}
		return r
	})
	ok := 0
	for _, r := range res {
		switch {
		case r.Status == 200:
			ok++
			if !queue.JSONEqual(r.Action(t).ApprovedPayload, []byte(edited)) {
				t.Errorf("execute handed out %s, want the approved edit", r.Action(t).ApprovedPayload)
			}
		case r.Status == 409 && r.Problem(t).Code == queue.CodeInProgress:
		default:
			t.Errorf("execute: %d %s", r.Status, r.Body)
		}
	}
	if ok != 1 {
		t.Fatalf("%d executes succeeded, want 1", ok)
	}
}

func TestProbes(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-9", "m"))
	// The same submission again: a replay, answered by the lookup.
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-9", "m")).Action(t)
	// One transition, counted in its own queue.
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct{ path, want string }{
		{"/healthz", "ok"},
		{"/readyz", "ready"},
		{"/metrics", `approvals_submissions_total{class="at-most-once",outcome="created"} 1`},
		{"/metrics", `approvals_replay_lookups_total{result="found"} 1`},
		{"/metrics", `approvals_store_batches_refused_total{queue="submissions"} 0`},
		{"/metrics", `approvals_store_batches_refused_total{queue="transitions"} 0`},
		{"/metrics", `approvals_store_batched_calls_total{queue="transitions"} 1`},
	} {
		path, want := c.path, c.want
		res, err := http.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(res))
		if res.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Errorf("%s: %d, missing %q", path, res.StatusCode, want)
		}
	}
}

// TestProbesSQLite: on SQLite /metrics shows the group commit's counters
// and no replay-lookup counter, which only PostgreSQL's store could move.
func TestProbesSQLite(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{SQLite: true})
	e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-9", "m"))
	res, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(res)
	if !strings.Contains(body, `approvals_store_batched_calls_total{queue="writes"} `) || !strings.Contains(body, `approvals_store_batches_refused_total{queue="writes"} 0`) {
		t.Errorf("/metrics lacks the SQLite writer's counters:\n%s", body)
	}
	if strings.Contains(body, "approvals_replay_lookups_total") {
		t.Errorf("/metrics shows replay lookups on SQLite, which has none")
	}
}

func readAll(res *http.Response) string {
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestRevokedTokenRefusedOnTheHotPath: a submission whose token was seen
// valid (so its agent name is cached and the claiming statement checks
// the token) is refused with 401 as soon as the token is revoked, before
// any other refusal, with nothing written; on SQLite the token is always
// looked up.
func TestRevokedTokenRefusedOnTheHotPath(t *testing.T) {
	t.Parallel()
	for _, store := range apptest.APIStores {
		t.Run(store.Name, func(t *testing.T) {
			t.Parallel()
			e := store.Start(t)
			held := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-1", "held"))
			if held.Status != 201 {
				t.Fatalf("setup: %d %s", held.Status, held.Body)
			}
			cases := []struct {
				name string
				body any
			}{
				{"new intent", apptest.EmailBody("c-2", "welcome")},
				{"replay of a held intent", apptest.EmailBody("c-1", "held")},
				{"malformed JSON", `{"tool":`},
				{"schema failure", `{"tool":"send_customer_email","payload":{"customer_id":"c","topic":"t"}}`},
				{"no intent key", `{"tool":"unlisted_mailer","payload":{"x":1}}`},
			}
			for i, tc := range cases {
				name := fmt.Sprintf("agent-%d", i)
				token := e.Token(e.T, name)
				// Seen valid once: the server remembers the token.
				first := e.Do(e.URL, token, "POST", "/api/v1/actions", apptest.EmailBody(fmt.Sprintf("warm-%d", i), "x"))
				if first.Status != 201 {
					t.Fatalf("%s: warm-up %d %s", tc.name, first.Status, first.Body)
				}
				if err := e.Store.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: name, Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
				for attempt := range 2 {
					r := e.Do(e.URL, token, "POST", "/api/v1/actions", tc.body)
					if r.Status != 401 || string(r.Problem(t).Code) != "unauthorized" {
						t.Fatalf("%s (attempt %d): %d %s, want 401 unauthorized", tc.name, attempt+1, r.Status, r.Body)
					}
				}
			}
			list := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions?intent_key=email:c-2:welcome", nil)
			if !strings.Contains(string(list.Body), `"actions":[]`) {
				t.Errorf("a refused submission was stored: %s", list.Body)
			}
			evs, err := queue.Timeline(t.Context(), e.Store, held.Action(t).ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Errorf("held action has %d events, want 1 (the refused replay recorded nothing)", len(evs))
			}
		})
	}
}

// TestRevokedTokenRefusedOnDriveCalls: the drive calls (execute, complete,
// fail, cancel) of an agent whose token was seen valid take its name from
// the cache and check the token in the transition's statement; once the
// token is revoked, every one of them answers 401 before anything else, a
// call that would move the action as well as one that would replay (200),
// be refused (400, 404) or conflict, and no action moves. On SQLite the
// token is always looked up.
func TestRevokedTokenRefusedOnDriveCalls(t *testing.T) {
	t.Parallel()
	for _, store := range apptest.APIStores {
		t.Run(store.Name, func(t *testing.T) {
			t.Parallel()
			e := store.Start(t)
			token := e.Token(e.T, "driver")
			submit := func(body any, want int) queue.Action {
				t.Helper()
				r := e.Do(e.URL, token, "POST", "/api/v1/actions", body)
				if r.Status != want {
					t.Fatalf("setup: submit answered %d %s, want %d", r.Status, r.Body, want)
				}
				return r.Action(t)
			}
			claimed := submit(apptest.RefundBody("r-1", 5), 201)
			done := submit(apptest.RefundBody("r-2", 5), 201)
			// Seen valid on a drive call: the server remembers the token.
			if r := e.Do(e.URL, token, "POST", "/api/v1/actions/"+done.ID+"/complete", `{"result":{"ok":true}}`); r.Status != 200 {
				t.Fatalf("setup: complete %d %s", r.Status, r.Body)
			}
			pending := submit(apptest.EmailBody("d-1", "t"), 201)
			approved := submit(apptest.EmailBody("d-2", "t"), 201)
			if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: approved.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			before := map[string]int{}
			for _, id := range []string{claimed.ID, done.ID, pending.ID, approved.ID} {
				evs, err := queue.Timeline(t.Context(), e.Store, id)
				if err != nil {
					t.Fatal(err)
				}
				before[id] = len(evs)
			}
			if err := e.Store.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "driver", Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				name, path string
				body       any
			}{
				{"complete that would move the action", "/api/v1/actions/" + claimed.ID + "/complete", `{"result":{"ok":true}}`},
				{"complete that would replay", "/api/v1/actions/" + done.ID + "/complete", `{"result":{"ok":true}}`},
				{"complete that would conflict", "/api/v1/actions/" + done.ID + "/complete", `{"result":{"ok":false}}`},
				{"fail that would move the action", "/api/v1/actions/" + claimed.ID + "/fail", `{"error":"declined"}`},
				{"cancel that would move the action", "/api/v1/actions/" + pending.ID + "/cancel", nil},
				{"execute that would claim the approval", "/api/v1/actions/" + approved.ID + "/execute", nil},
				{"complete of an unknown action", "/api/v1/actions/" + queue.NewID(time.Now()) + "/complete", `{"result":{}}`},
				{"complete with a malformed body", "/api/v1/actions/" + claimed.ID + "/complete", `{"result":`},
			}
			for i, tc := range cases {
				// A 401 makes the server forget the token, so each case has a
				// token of its own, seen valid and then revoked. The name is
				// free again once revoked, and the name is the agent.
				token := e.Token(e.T, "driver")
				if r := e.Do(e.URL, token, "POST", "/api/v1/actions", apptest.RefundBody(fmt.Sprintf("warm-%d", i), 1)); r.Status != 201 {
					t.Fatalf("%s: warm-up %d %s", tc.name, r.Status, r.Body)
				}
				if err := e.Store.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "driver", Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
				for attempt := range 2 {
					r := e.Do(e.URL, token, "POST", tc.path, tc.body)
					if r.Status != 401 || string(r.Problem(t).Code) != "unauthorized" {
						t.Fatalf("%s (attempt %d): %d %s, want 401 unauthorized", tc.name, attempt+1, r.Status, r.Body)
					}
				}
			}
			for id, want := range map[string]queue.State{claimed.ID: queue.StateInProgress, done.ID: queue.StateDone,
				pending.ID: queue.StatePending, approved.ID: queue.StateApproved} {
				a, err := e.Store.ActionGetByID(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if a.State != want {
					t.Errorf("%s is %s after the refused calls, want %s", id, a.State, want)
				}
				evs, err := queue.Timeline(t.Context(), e.Store, id)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) != before[id] {
					t.Errorf("%s has %d events after the refused calls, want %d (nothing recorded)", id, len(evs), before[id])
				}
			}
		})
	}
}

// TestUnknownAPIPathsAuthenticateFirst: without a token every path under
// /api/v1 answers 401, so the routes cannot be mapped anonymously; with a
// token an unknown one is 404.
func TestUnknownAPIPathsAuthenticateFirst(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	// Not through e.do: the OpenAPI document rightly lists no such path.
	status := func(token string) int {
		req, err := http.NewRequest("GET", e.URL+"/api/v1/nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := e.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status(""); got != 401 {
		t.Errorf("unknown path without a token: %d, want 401", got)
	}
	if got := status(e.AgentToken); got != 404 {
		t.Errorf("unknown path with a token: %d, want 404", got)
	}
}

// TestUnknownActionNamesTheID: a 404 carries a detail naming the id, on
// PostgreSQL as on SQLite.
func TestUnknownActionNamesTheID(t *testing.T) {
	t.Parallel()
	for _, store := range apptest.APIStores {
		e := store.Start(t)
		id := queue.NewID(time.Now())
		r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+id, nil)
		if p := r.Problem(t); r.Status != 404 || p.Code != queue.CodeNotFound || !strings.Contains(p.Detail, id) {
			t.Errorf("GET unknown action: %d %s, want 404 not_found naming %s", r.Status, r.Body, id)
		}
	}
}

// Storage that stops answering is 503 unavailable, a documented answer
// that says to try again and reveals nothing of the failure; reads and
// transitions alike, with Retry-After, and the service recovers when
// storage does.
func TestStorageDownIs503(t *testing.T) {
	t.Parallel()
	var outage apptest.Outage
	e := apptest.StartAPI(t, apptest.Options{WrapStore: outage.Wrap})
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-503", "down")).Action(t)
	outage.Begin()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/actions/" + a.ID},
		{"GET", "/api/v1/actions/" + a.ID + "?wait=5s"},
		{"POST", "/api/v1/actions/" + a.ID + "/cancel"},
	} {
		r := e.Do(e.URL, e.AgentToken, tc.method, tc.path, nil)
		if p := r.Problem(t); r.Status != http.StatusServiceUnavailable || p.Code != queue.CodeUnavailable || strings.Contains(string(r.Body), "refused") {
			t.Errorf("%s %s with storage down: %d %s", tc.method, tc.path, r.Status, r.Body)
		}
		// A client (the SDKs) waits as told before trying again, long
		// enough for a failover's promotion to get under way.
		if got := r.Header.Get("Retry-After"); got != "2" {
			t.Errorf("%s %s with storage down: Retry-After %q, want 2", tc.method, tc.path, got)
		}
	}
	r, err := http.Get(e.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz with storage down: %d", r.StatusCode)
	}
	outage.End()
	if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/cancel", nil); r.Status != http.StatusOK {
		t.Fatalf("cancel after the outage: %d %s", r.Status, r.Body)
	}
}
