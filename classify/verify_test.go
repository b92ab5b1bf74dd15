package classify

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

const refundVerify = `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: http://127.0.0.1:9/refunds/lookup
      timeout: 5s
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      settle: 3m
      resolve: auto
`

func refundTool(t *testing.T) Tool {
	t.Helper()
	reg, err := Parse([]byte(refundVerify), Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := reg.Lookup("issue_refund")
	if tool.Verify == nil {
		t.Fatal("no verifier parsed")
	}
	return tool
}

// The verify block parses with its defaults and survives the JSON round
// trip an action's snapshot makes.
func TestVerifyParse(t *testing.T) {
	t.Parallel()
	tool := refundTool(t)
	v := tool.Verify
	if v.Timeout != 5*time.Second || v.Settle != 3*time.Minute || v.Resolve != ResolveAuto || v.Webhook == "" {
		t.Fatalf("verify = %+v", v)
	}
	js, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	var back Tool
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Verify == nil || !reflect.DeepEqual(*back.Verify, *v) {
		t.Fatalf("round trip: %+v, want %+v", back.Verify, v)
	}
	reg, err := Parse([]byte("tools:\n  t:\n    verify:\n      webhook: https://x.example/v\n      done: 'response.ok == true'\n"), Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := reg.Lookup("t")
	if d.Verify.Resolve != ResolveSuggest || d.Verify.Timeout != DefaultVerifyTimeout {
		t.Fatalf("defaults: %+v", d.Verify)
	}
}

// tools check refuses every verifier it cannot use, naming the field.
func TestVerifyParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, verify string
		want         []string
	}{
		{"no way to ask", "done: 'true'", []string{`"verify"`, "how to ask"}},
		{"both ways", "webhook: http://a/b\n      upstream: x\n      tool: y\n      done: 'true'", []string{"both webhook and upstream"}},
		{"bad url", "webhook: /lookup\n      done: 'true'", []string{`"verify.webhook"`, "absolute"}},
		{"no expressions", "webhook: http://a/b", []string{"needs done or not_done"}},
		{"auto without done", "webhook: http://a/b\n      not_done: 'response.found == false'\n      resolve: auto", []string{`"verify.resolve"`, "needs done"}},
		{"bad mode", "webhook: http://a/b\n      done: 'true'\n      resolve: maybe", []string{`"maybe" is not a mode`}},
		{"syntax", "webhook: http://a/b\n      done: 'response.refunds.exists(r, '", []string{`"verify.done"`, "column"}},
		{"unknown variable", "webhook: http://a/b\n      done: 'agent == \"x\"'", []string{`"verify.done"`, "undeclared reference to 'agent'"}},
		{"not a bool", "webhook: http://a/b\n      done: '1 + 2'", []string{`"verify.done"`, "not a bool"}},
		{"result syntax", "webhook: http://a/b\n      done: 'true'\n      result: 'response.('", []string{`"verify.result"`}},
		{"unknown key", "webhook: http://a/b\n      done: 'true'\n      proves: x", []string{`unknown key "proves"`}},
		{"no upstream", "upstream: payments\n      tool: get_refunds\n      done: 'true'", []string{`"verify.upstream"`, `no upstream is named "payments"`}},
		{"upstream without tool", "upstream: payments\n      done: 'true'", []string{`"verify.tool"`}},
		{"timeout too long", "webhook: http://a/b\n      timeout: 5m\n      done: 'true'", []string{`"verify.timeout"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "tools:\n  t:\n    verify:\n      " + tc.verify + "\n"
			_, err := Parse([]byte(src), Options{WebhookSecretSet: true})
			if err == nil {
				t.Fatalf("parsed:\n%s", src)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// A webhook verifier signs as executions do: without a key it cannot.
	if _, err := Parse([]byte("tools:\n  t:\n    verify:\n      webhook: http://a/b\n      done: 'true'\n"), Options{}); err == nil || !strings.Contains(err.Error(), "APPROVALS_WEBHOOK_SECRET") {
		t.Fatalf("unsigned verifier: %v", err)
	}
}

// An upstream verifier's tool must exist upstream and only read.
func TestVerifyUpstreamTool(t *testing.T) {
	t.Parallel()
	src := "upstreams:\n  payments:\n    url: http://127.0.0.1:9/mcp\n    import: [issue_refund]\n" +
		"tools:\n  issue_refund:\n    class: exactly-once\n    claim_timeout: 2m\n    verify:\n      upstream: payments\n      tool: get_refunds\n" +
		"      arguments: { order_id: \"{order_id}\" }\n      done: 'response.refunds.size() > 0'\n"
	reg, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	listing := func(tools ...UpstreamTool) map[string]UpstreamListing {
		return map[string]UpstreamListing{"payments": {Tools: tools}}
	}
	refund := UpstreamTool{Name: "issue_refund"}
	for _, tc := range []struct {
		name     string
		listings map[string]UpstreamListing
		want     string
	}{
		{"read-only", listing(refund, UpstreamTool{Name: "get_refunds", Annotations: Annotations{ReadOnlyHint: &yes}}), ""},
		{"missing", listing(refund), "lists no tool get_refunds"},
		{"writes", listing(refund, UpstreamTool{Name: "get_refunds", Annotations: Annotations{ReadOnlyHint: &no}}), "not read-only"},
		{"down", map[string]UpstreamListing{"payments": {Unavailable: "connection refused"}}, ""},
	} {
		err := reg.CheckVerifierUpstreams(tc.listings)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Each verdict, settle, and every way of proving nothing.
func TestVerifyEvaluate(t *testing.T) {
	t.Parallel()
	tool := refundTool(t)
	claimed := policyNow
	afterSettle := claimed.Add(2*time.Minute + 3*time.Minute)
	in := func(answer string, now time.Time) (VerifyInput, json.RawMessage) {
		var resp any
		if answer != "" {
			dec := json.NewDecoder(strings.NewReader(answer))
			dec.UseNumber()
			if err := dec.Decode(&resp); err != nil {
				t.Fatal(err)
			}
		}
		return VerifyInput{Response: resp, Payload: map[string]any{"order_id": "o-1", "line_id": "l-2"},
			Action: map[string]any{"id": "a"}, ClaimedAt: claimed, Now: now}, json.RawMessage(answer)
	}
	for _, tc := range []struct {
		name, answer string
		now          time.Time
		verdict      string
		reason       string
		result       string
	}{
		{"found", `{"refunds":[{"line_id":"l-1","id":"re_0"},{"line_id":"l-2","id":"re_9","amount":12.5}]}`, claimed, VerdictDone, "done holds", `{"amount":12.5,"id":"re_9","line_id":"l-2"}`},
		{"not found, settled", `{"refunds":[{"line_id":"l-1"}]}`, afterSettle, VerdictNotDone, "not_done holds", ""},
		{"not found, too early", `{"refunds":[]}`, afterSettle.Add(-time.Second), VerdictUnknown, "settle", ""},
		{"garbage shape", `{"error":"nope"}`, afterSettle, VerdictUnknown, "expression failed", ""},
		{"null answer", `null`, afterSettle, VerdictUnknown, "expression failed", ""},
	} {
		i, raw := in(tc.answer, tc.now)
		out := tool.Verify.Evaluate(&tool, i, raw)
		if out.Verdict != tc.verdict || !strings.Contains(out.Reason, tc.reason) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, out.Verdict, out.Reason, tc.verdict, tc.reason)
		}
		if tc.result != "" {
			var got, want any
			_ = json.Unmarshal(out.Result, &got)
			_ = json.Unmarshal([]byte(tc.result), &want)
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("%s: result %s, want %s", tc.name, out.Result, tc.result)
			}
		}
	}
	// Both holding proves nothing.
	both := &Verify{Done: "true", NotDone: "true", Settle: time.Nanosecond}
	if out := both.Evaluate(&tool, VerifyInput{ClaimedAt: claimed, Now: afterSettle}, nil); out.Verdict != VerdictUnknown {
		t.Errorf("both: %+v", out)
	}
	// An expression over the cost limit is an error, never a proof.
	costly := &Verify{Done: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))"}
	if out := costly.Evaluate(&tool, VerifyInput{Now: afterSettle}, nil); out.Verdict != VerdictUnknown || !strings.Contains(out.Reason, "cost") {
		t.Errorf("costly: %+v", out)
	}
}
