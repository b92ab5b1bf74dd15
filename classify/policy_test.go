package classify

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// policyTool parses a tools file with one tool whose policy is rules (YAML
// list items) and returns that tool.
func policyTool(t *testing.T, class string, rules ...string) Tool {
	t.Helper()
	src := "groups:\n  finance: [fin@example.com, fay@example.com]\ntools:\n  t:\n    class: " + class + "\n    approval:\n      policy:\n"
	for _, r := range rules {
		src += "        - " + r + "\n"
	}
	reg, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", src, err)
	}
	tool, _ := reg.Lookup("t")
	return tool
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

var policyNow = time.Date(2031, 3, 14, 9, 26, 53, 0, time.UTC)

func input(t *testing.T, payload string) PolicyInput {
	return PolicyInput{Payload: decode(t, payload), Tool: "t", Agent: "support-bot", IntentKey: "email:c-1:welcome",
		Attempt: 3, Now: policyNow}
}

// Every variable of the environment, and the string extensions, evaluate
// as docs/tools-file.md ("Policies and grants") says; each expression is
// checked both ways.
func TestPolicyVariables(t *testing.T) {
	t.Parallel()
	const payload = `{"to":"Ada@Example.com","amount":600,"price":12.5,"vip":true,"tags":["a","b"],"customer":{"id":"vip-7"},"big":123456789012345678901234567890}`
	for _, tc := range []struct{ yes, no string }{
		{`payload.to == "Ada@Example.com"`, `payload.to == "ada@example.com"`},
		{`payload.amount > 500`, `payload.amount > 600`},
		{`double(payload.amount) > 500.0`, `double(payload.amount) > 600.0`},
		{`payload.amount == 600.0`, `payload.amount == 600.5`},
		{`payload.price < 13`, `payload.price < 12`},
		{`payload.vip == true`, `payload.vip == false`},
		{`"b" in payload.tags`, `"c" in payload.tags`},
		{`payload.customer.id.startsWith("vip-")`, `payload.customer.id.startsWith("std-")`},
		{`has(payload.customer)`, `has(payload.missing)`},
		{`payload.big > 1e29`, `payload.big < 1e29`},
		{`tool == "t"`, `tool == "u"`},
		{`agent == "support-bot"`, `agent.startsWith("other")`},
		{`intent_key.startsWith("email:")`, `intent_key == "email:c-2:welcome"`},
		{`attempt == 3`, `attempt > 3`},
		{`now > timestamp("2031-01-01T00:00:00Z")`, `now < timestamp("2031-01-01T00:00:00Z")`},
		{`now.getHours() == 9`, `now.getDayOfWeek() == 0`},
		// ext.Strings()
		{`payload.to.lowerAscii().endsWith("@example.com")`, `payload.to.endsWith("@example.com")`},
		{`payload.to.split("@")[1] == "Example.com"`, `payload.to.split("@").size() == 3`},
		{`payload.to.indexOf("@") == 3`, `payload.to.contains("example")`},
		{`payload.to.replace("Ada", "Bob") == "Bob@Example.com"`, `payload.to.upperAscii() == payload.to`},
		{`payload.to.substring(0, 3) == "Ada"`, `payload.to.trim() != payload.to`},
		{`["x", "y"].join("-") == "x-y"`, `"%s".format(["a"]) == "b"`},
	} {
		tool := policyTool(t, "at-most-once",
			fmt.Sprintf("{ name: yes, when: %q, decide: approve }", tc.yes))
		if v := tool.Evaluate(input(t, payload)); v.Rule == nil || len(v.Errors) > 0 {
			t.Errorf("%s: %+v, want a match", tc.yes, v)
		}
		tool = policyTool(t, "at-most-once",
			fmt.Sprintf("{ name: no, when: %q, decide: approve }", tc.no))
		if v := tool.Evaluate(input(t, payload)); v.Rule != nil || len(v.Errors) > 0 {
			t.Errorf("%s: %+v, want no match and no error", tc.no, v)
		}
	}
}

// The first rule that matches decides, in the file's order.
func TestPolicyFirstMatchDecides(t *testing.T) {
	t.Parallel()
	tool := policyTool(t, "at-most-once",
		`{ name: a, when: 'payload.n > 10', decide: reject, note: "too many" }`,
		`{ name: b, when: 'payload.n > 5', decide: human, required: 2, approvers: [finance] }`,
		`{ name: c, when: 'true', decide: approve }`)
	for n, want := range map[int]string{11: "a", 6: "b", 1: "c"} {
		v := tool.Evaluate(input(t, fmt.Sprintf(`{"n":%d}`, n)))
		if v.Rule == nil || v.Rule.Name != want {
			t.Errorf("n=%d: %+v, want rule %s", n, v.Rule, want)
		}
	}
	b := tool.Approval.Policy[1]
	if b.Decide != DecideHuman || b.Required != 2 || strings.Join(b.ApproverEmails, ",") != "fay@example.com,fin@example.com" {
		t.Errorf("human rule: %+v", b)
	}
	under := tool.Approval.UnderRule(&b)
	if under.Rule != "b" || under.Required != 2 || under.Decision != DecideHuman || !under.MayDecide(Person{Email: "fin@example.com"}, false) || under.MayDecide(Person{Email: "x@example.com"}, false) {
		t.Errorf("the approval under rule b: %+v", under)
	}
}

// A human rule's approvers may name an identity provider group ("idp:"):
// its members decide what the rule sends to a person, as of their last
// sign-in, and a required count the tools file cannot check is not refused.
func TestPolicyHumanRuleWithIdPGroup(t *testing.T) {
	t.Parallel()
	src := `groups:
  finance: [fin@example.com, "idp:finance-team"]
tools:
  t:
    class: at-most-once
    approval:
      policy:
        - { name: big, when: 'payload.n > 5', decide: human, required: 3, approvers: [finance] }
`
	reg, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatalf("a required count over an IdP group was refused: %v", err)
	}
	tool, _ := reg.Lookup("t")
	r := tool.Approval.Policy[0]
	if strings.Join(r.ApproverEmails, ",") != "fin@example.com" || strings.Join(r.ApproverIdPGroups, ",") != "finance-team" {
		t.Fatalf("the rule's approvers: emails %v, IdP groups %v", r.ApproverEmails, r.ApproverIdPGroups)
	}
	under := tool.Approval.UnderRule(&r)
	for _, tc := range []struct {
		p    Person
		want bool
	}{
		{Person{Email: "fin@example.com"}, true},
		{Person{Email: "zoe@example.com", IdPGroups: []string{"staff", "finance-team"}}, true},
		{Person{Email: "yan@example.com", IdPGroups: []string{"staff"}}, false},
	} {
		if got := under.MayDecide(tc.p, false); got != tc.want {
			t.Errorf("MayDecide(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	// Without an IdP group the count is checked, as for the tool's own approvers.
	if _, err := Parse([]byte(strings.Replace(src, `, "idp:finance-team"`, "", 1)), Options{}); err == nil ||
		!strings.Contains(err.Error(), "3 approvals need 3 different people") {
		t.Fatalf("required 3 of one person: %v", err)
	}
}

// An evaluation error (a missing field, a wrong type, a number beyond a
// double, the cost limit) stops the evaluation at that rule: it is Failed,
// with its error, and no later rule is reached, whatever it says (fail
// closed: the agent controls whether an expression errors).
func TestPolicyRuntimeErrorsFailClosed(t *testing.T) {
	t.Parallel()
	items := make([]string, 3000)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	list, _ := json.Marshal(items)
	for _, tc := range []struct {
		name, when, payload, text string
	}{
		{"missing", `payload.amount > 5`, `{"n":1}`, "no such key: amount"},
		{"wrong-type", `payload.to.endsWith("@example.com")`, `{"to":7,"n":1}`, "no such overload"},
		{"text-for-number", `payload.amount > 500`, `{"amount":"5000","n":1}`, "no such overload"},
		{"beyond-double", `double(payload.amount) > 500.0`, `{"amount":1e309,"n":1}`, "does not fit a double"},
		{"beyond-double-negative", `payload.amount < 0`, `{"amount":-1e309,"n":1}`, "does not fit a double"},
		{"beyond-double-as-text", `string(payload.amount) == "1e309"`, `{"amount":1e309,"n":1}`, "does not fit a double"},
		// The cost limit, or on a loaded machine the time limit first:
		// either fails the rule closed.
		{"costly", `payload.items.all(x, payload.items.all(y, x == y || x != y))`, `{"n":1,"items":` + string(list) + `}`, "limit"},
		// A list or object holding such a number compares, as a whole,
		// never equal by skipping it (cel-go's list and map equality take
		// an element's error for "equal").
		{"beyond-double-in-list", `payload.amounts == [5, 2]`, `{"amounts":[1e309,2],"n":1}`, "does not fit a double"},
		{"beyond-double-in-object", `payload.limits == {"max": 10}`, `{"limits":{"max":1e309},"n":1}`, "does not fit a double"},
		{"beyond-double-deep", `payload.a == {"b": [{"c": 1}]}`, `{"a":{"b":[{"c":-1e309}]},"n":1}`, "does not fit a double"},
		{"beyond-double-whole-payload", `payload == {"amount": 5, "n": 1}`, `{"amount":1e309,"n":1}`, "does not fit a double"},
		{"beyond-double-lists-differ", `payload.a == payload.b`, `{"a":[1e309],"b":[-1e309],"n":1}`, "does not fit a double"},
		{"beyond-double-in-list-in", `!(5 in payload.amounts)`, `{"amounts":[1e309],"n":1}`, "does not fit a double"},
	} {
		for _, decide := range []string{"human", "reject", "approve"} {
			note := ""
			if decide == "reject" {
				note = ", note: no"
			}
			tool := policyTool(t, "at-most-once",
				fmt.Sprintf(`{ name: %s, when: '%s', decide: %s%s }`, tc.name, tc.when, decide, note),
				`{ name: later-approve, when: 'payload.n == 1', decide: approve }`)
			v := tool.Evaluate(input(t, tc.payload))
			if v.Rule != nil || v.Failed == nil || v.Failed.Name != tc.name {
				t.Fatalf("%s (%s): rule %+v failed %+v, want %s failed and no rule", tc.name, decide, v.Rule, v.Failed, tc.name)
			}
			if len(v.Errors) != 1 || v.Errors[0].Rule != tc.name || !strings.Contains(v.Errors[0].Error, tc.text) {
				t.Fatalf("%s (%s): errors %+v, want one saying %q", tc.name, decide, v.Errors, tc.text)
			}
			h := v.HumanRule()
			if h == nil || h.Decide != DecideHuman || h.Name != tc.name || h.When != tc.when {
				t.Fatalf("%s (%s): human rule %+v", tc.name, decide, h)
			}
		}
	}
	// A small list stays well under the limit, and a payload that reads
	// well matches as before.
	tool := policyTool(t, "at-most-once",
		`{ name: costly, when: 'payload.items.all(x, payload.items.all(y, x == y || x != y))', decide: approve }`)
	if v := tool.Evaluate(input(t, `{"items":["a","b"]}`)); v.Rule == nil || v.Rule.Name != "costly" || v.Failed != nil {
		t.Fatalf("small list: %+v, want costly to match", v)
	}
	// A number beyond a double that no rule reads fails nothing.
	tool = policyTool(t, "at-most-once", `{ name: other, when: 'payload.n == 1', decide: approve }`)
	if v := tool.Evaluate(input(t, `{"n":1,"amount":1e309}`)); v.Rule == nil || v.Failed != nil {
		t.Fatalf("unread huge number: %+v", v)
	}
}

// A failed human rule routes by its own required and approvers.
func TestPolicyFailedHumanRuleRoutes(t *testing.T) {
	t.Parallel()
	tool := policyTool(t, "exactly-once",
		`{ name: large, when: 'double(payload.amount) > 500.0', decide: human, required: 2, approvers: [finance] }`)
	v := tool.Evaluate(input(t, `{"n":1}`))
	h := v.HumanRule()
	if h == nil || h != v.Failed || h.Required != 2 || len(h.ApproverEmails) != 2 {
		t.Fatalf("human rule %+v of %+v", h, v)
	}
	if v := tool.Evaluate(input(t, `{"amount":20}`)); v.HumanRule() != nil || v.Rule != nil {
		t.Fatalf("no failure: %+v", v)
	}
}

// Expressions that do not compile or type-check, or are not boolean, fail
// the file naming the tool, the rule and the position.
func TestPolicyLoadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rule string
		want []string
	}{
		{`{ name: syntax, when: 'payload.x +', decide: approve }`, []string{`rule "syntax"`, `approval.policy[0].when`, "column 12", "Syntax error"}},
		{`{ name: typo, when: 'paylod.x == 1', decide: approve }`, []string{`rule "typo"`, "column 1", "undeclared reference to 'paylod'"}},
		{`{ name: overload, when: 'attempt.startsWith("1")', decide: approve }`, []string{`rule "overload"`, "column 19", "found no matching overload"}},
		{`{ name: strcmp, when: 'tool == 1', decide: approve }`, []string{`rule "strcmp"`, "column 6", "no matching overload"}},
		{`{ name: int, when: '1 + 1', decide: approve }`, []string{`rule "int"`, "is int, not a bool"}},
		{`{ name: dyn, when: 'payload.vip', decide: approve }`, []string{`rule "dyn"`, "is dyn, not a bool", "payload.vip == true"}},
		{"{ name: multi, when: \"tool == 't' &&\\n  payload.x ==\", decide: approve }", []string{`rule "multi"`, "line 2, column", "of the expression"}},
		{`{ name: noteless, when: 'true', decide: reject }`, []string{`rule "noteless"`, "needs a note"}},
		{`{ name: odd, when: 'true', decide: maybe }`, []string{`rule "odd"`, `"maybe" is not a decision`}},
		{`{ name: crowd, when: 'true', required: 3, approvers: [finance] }`, []string{`rule "crowd"`, "3 approvals need 3 different people"}},
		{`{ name: ghosts, when: 'true', approvers: [nobody] }`, []string{`rule "ghosts"`, `unknown group "nobody"`}},
		{`{ name: approver, when: 'true', decide: approve, required: 2 }`, []string{`rule "approver"`, "belong to a human rule"}},
		{`{ when: 'true' }`, []string{`approval.policy[0]`, "needs a name"}},
		{`{ name: "bad name", when: 'true' }`, []string{`rule "bad name"`, "letters, digits"}},
		{`{ name: nowhen }`, []string{`rule "nowhen"`, "needs when"}},
		{`{ name: x, when: 'true', typo: 1 }`, []string{`unknown key "typo"`}},
	} {
		src := "groups:\n  finance: [fin@example.com, fay@example.com]\ntools:\n  mail:\n    approval:\n      policy:\n        - " + tc.rule + "\n"
		_, err := Parse([]byte(src), Options{})
		if err == nil {
			t.Errorf("%s: accepted", tc.rule)
			continue
		}
		for _, w := range append([]string{`tool "mail"`}, tc.want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.rule, err, w)
			}
		}
	}
}

func TestPolicyFileRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      string
	}{
		{"at-least-once takes none", "tools:\n  t:\n    class: at-least-once\n    approval:\n      policy:\n        - { name: a, when: 'true' }\n", "not allowed on at-least-once tools"},
		{"twice", "tools:\n  t:\n    approval:\n      policy:\n        - { name: a, when: 'true' }\n        - { name: a, when: 'false' }\n", "used twice"},
		{"not a list", "tools:\n  t:\n    approval:\n      policy: { name: a }\n", "must be a list of rules"},
		{"grants on exactly-once", "tools:\n  t:\n    class: exactly-once\n    approval:\n      grants: { max: 1h }\n", "grants approve at-most-once actions only"},
		{"grants max", "tools:\n  t:\n    approval:\n      grants: { max: forever }\n", `"approval.grants.max"`},
		{"grants uses", "tools:\n  t:\n    approval:\n      grants: { max_uses: 0 }\n", "at least 1"},
		{"grants yes", "tools:\n  t:\n    approval:\n      grants: yes-please\n", "must be false or a mapping"},
	} {
		_, err := Parse([]byte(tc.src), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestGrantLimits(t *testing.T) {
	t.Parallel()
	src := `tools:
  capped:
    approval:
      grants: { max: 8h, max_uses: 100 }
  plain: {}
  none:
    approval:
      grants: false
  quorum:
    approval:
      required: 2
  refund:
    class: exactly-once
    approval:
      grants: false
      policy:
        - { name: large, when: 'true' }
`
	reg, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		max  time.Duration
		uses int
		err  string
	}{
		"capped": {8 * time.Hour, 100, ""},
		"plain":  {DefaultGrantMax, 0, ""},
		"none":   {0, 0, "does not allow grants"},
		"quorum": {0, 0, "needs 2 approvals"},
		"refund": {0, 0, "grants approve only at-most-once"},
	} {
		tool, _ := reg.Lookup(name)
		l, err := tool.GrantLimits()
		switch {
		case want.err != "":
			if err == nil || !strings.Contains(err.Error(), want.err) || tool.GrantsApply() {
				t.Errorf("%s: %v, want a refusal saying %q", name, err, want.err)
			}
		case err != nil || l.Max != want.max || l.MaxUses != want.uses || !tool.GrantsApply():
			t.Errorf("%s: %+v %v, want max %s and %d uses", name, l, err, want.max, want.uses)
		}
	}
	unregistered, _ := reg.Lookup("not-in-the-file")
	if unregistered.GrantsApply() {
		t.Error("grants apply to a tool outside the file")
	}
}

// The snapshot an action keeps carries no policy: only the rule that
// decided (json tag "rule"), so that a later change of the file affects new
// submissions only; the compiled program never leaves the registry.
func TestPolicyStaysOutOfTheSnapshot(t *testing.T) {
	t.Parallel()
	tool := policyTool(t, "exactly-once", `{ name: large, when: 'payload.amount > 5' }`)
	if !tool.HasPolicy() || tool.PolicyUsesAttempt() {
		t.Fatalf("has policy %v, uses attempt %v", tool.HasPolicy(), tool.PolicyUsesAttempt())
	}
	b, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "payload.amount") {
		t.Fatalf("the snapshot holds the policy: %s", b)
	}
	if retry := policyTool(t, "at-most-once", `{ name: retry, when: 'attempt > 2' }`); !retry.PolicyUsesAttempt() {
		t.Error("a rule reading attempt is not noticed")
	}
}

// Compiling is done once per load; an evaluation of a small rule costs
// microseconds, which BenchmarkPolicyEvaluate measures.
func BenchmarkPolicyEvaluate(b *testing.B) {
	src := `tools:
  t:
    approval:
      policy:
        - { name: internal, when: 'payload.to.endsWith("@example.com")', decide: approve }
        - { name: legal, when: 'payload.topic in ["legal", "lawsuit"]', decide: reject, note: "no" }
        - { name: vip, when: 'payload.customer_id.startsWith("vip-")' }
`
	reg, err := Parse([]byte(src), Options{})
	if err != nil {
		b.Fatal(err)
	}
	tool, _ := reg.Lookup("t")
	dec := json.NewDecoder(strings.NewReader(`{"customer_id":"c-42","topic":"welcome","to":"ada@customer.org","subject":"Hi","body":"Hello"}`))
	dec.UseNumber()
	var payload map[string]any
	if err := dec.Decode(&payload); err != nil {
		b.Fatal(err)
	}
	in := PolicyInput{Payload: payload, Tool: "t", Agent: "bot", IntentKey: "k", Attempt: 1, Now: policyNow}
	b.ReportAllocs()
	for b.Loop() {
		if v := tool.Evaluate(in); v.Rule != nil {
			b.Fatal("matched")
		}
	}
}

// Rules compiled at once share one environment; under -race this fails
// when the environment is shared before cel-go's lazily built catalog
// exists (newPolicyEnv builds it first).
func TestPolicyEnvSharedByConcurrentCompiles(t *testing.T) {
	t.Parallel()
	env, err := newPolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		`payload.items.exists(i, i == "x")`,      // enters a comprehension's scope
		`nope.field == 1`,                        // an undeclared reference: reads the catalog
		`[1, 2].all(n, n > 0) && tool == "send"`, // another comprehension
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				_, _ = env.Compile(exprs[(g+i)%len(exprs)])
			}
		})
	}
	wg.Wait()
	if _, iss := env.Compile(`payload.items.exists(i, i == "x")`); iss != nil && iss.Err() != nil {
		t.Fatalf("a valid rule after the concurrent compiles: %v", iss.Err())
	}
}

// An evaluation that the cost model undercounts (cel-go measures the
// strings an equality or size() reads in time, not in cost units: a loop
// over a long list reading a long field costs little and takes seconds)
// stops at the time limit and fails closed, as the cost limit does.
func TestPolicyTimeLimitFailsClosed(t *testing.T) {
	t.Parallel()
	items, _ := json.Marshal(make([]int, 40000))
	payload := fmt.Sprintf(`{"items":%s,"note":%q,"n":1}`, items, strings.Repeat("A", 150000))
	tool := policyTool(t, "at-most-once",
		`{ name: slow, when: 'payload.items.all(i, payload.note != "")', decide: human }`,
		`{ name: later-approve, when: 'payload.n == 1', decide: approve }`)
	start := time.Now()
	v := tool.Evaluate(input(t, payload))
	took := time.Since(start)
	if v.Rule != nil || v.Failed == nil || v.Failed.Name != "slow" || len(v.Errors) != 1 || !strings.Contains(v.Errors[0].Error, "time limit") {
		t.Fatalf("took %s: rule %+v failed %+v errors %+v, want slow failed at the time limit", took, v.Rule, v.Failed, v.Errors)
	}
}

// A human rule decides with the tool's required or approvers where it names
// none (UnderRule): the count of section 9 is of what the rule's actions
// will need, so a rule's required above the tool's people, or the tool's
// required above the rule's people, fails the file; the tool's escalate_to
// people count as eligible, as for the tool's own rule.
func TestPolicyRuleRequiredCountsWhatTheActionNeeds(t *testing.T) {
	t.Parallel()
	head := "groups:\n  leads: [ann@example.com, bob@example.com, cat@example.com]\n  finance: [fin@example.com]\n  night: [nia@example.com, ned@example.com]\ntools:\n  mail:\n    approval:\n"
	for _, tc := range []struct {
		name, approval string
		want           string // "" accepted
	}{
		{"rule required over the tool's approvers", "      approvers: [finance]\n      policy:\n        - { name: big, when: 'true', required: 2 }\n", "2 approvals need 2 different people"},
		{"tool required over the rule's approvers", "      approvers: [leads]\n      required: 2\n      policy:\n        - { name: big, when: 'true', approvers: [finance] }\n", "2 approvals need 2 different people"},
		{"escalation people are eligible", "      approvers: [leads]\n      escalate_after: 1h\n      escalate_to: [night]\n      policy:\n        - { name: big, when: 'true', required: 3, approvers: [finance] }\n", ""},
		{"enough", "      approvers: [leads]\n      required: 2\n      policy:\n        - { name: big, when: 'true', required: 1, approvers: [finance] }\n", ""},
	} {
		_, err := Parse([]byte(head+tc.approval), Options{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `tool "mail"`)):
			t.Errorf("%s: %v, want an error naming the tool and saying %q", tc.name, err, tc.want)
		}
	}
}
