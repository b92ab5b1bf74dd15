package classify

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var allSet = Options{WebhookSecretSet: true, SlackConfigured: true, SMTPConfigured: true}

const routingFile = `
groups:
  support-leads: [Ann@Example.com, bob@example.com]
  night-shift: [cara@example.com, ann@example.com]
channels:
  support-slack: { slack: { channel: C0APPROVALS } }
  leads-mail:    { email: { to: [leads@example.com] } }
  ops-events:    { webhook: "http://127.0.0.1:9100/events", secret: events-secret, events: [ticket.opened, action.failed] }
  escalations:   { webhook: "http://127.0.0.1:9100/escalations", secret: events-secret }
tools:
  send_customer_email:
    class: at-most-once
    approval:
      approvers: [support-leads]
      required: 3
      notify: [support-slack, leads-mail]
      remind_after: 15m
      escalate_after: 1h
      escalate_to: [night-shift]
      escalate_notify: [escalations]
      bulk: false
  post_update:
    class: at-most-once
`

func TestParseApprovalRule(t *testing.T) {
	t.Parallel()
	r := mustParse(t, routingFile, allSet)
	tool := mustLookup(t, r, "send_customer_email")
	no := false
	want := &Approval{
		Approvers:      []string{"support-leads"},
		ApproverEmails: []string{"ann@example.com", "bob@example.com"},
		Required:       3,
		Notify:         []string{"support-slack", "leads-mail"},
		RemindAfter:    15 * time.Minute,
		EscalateAfter:  time.Hour,
		EscalateTo:     []string{"night-shift"},
		EscalateEmails: []string{"ann@example.com", "cara@example.com"},
		EscalateNotify: []string{"escalations"},
		Bulk:           &no,
	}
	if !reflect.DeepEqual(tool.Approval, want) {
		t.Fatalf("Approval = %+v\nwant       %+v", tool.Approval, want)
	}
	if tool.Approval.BulkAllowed() {
		t.Fatal("BulkAllowed() = true with bulk: false")
	}
	// The rule is part of the snapshot an action stores.
	raw, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	var back Tool
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Approval, want) {
		t.Fatalf("after a JSON round trip Approval = %+v", back.Approval)
	}
	// Lookup hands out copies.
	tool.Approval.ApproverEmails[0] = "mallory@example.com"
	if again := mustLookup(t, r, "send_customer_email"); again.Approval.ApproverEmails[0] != "ann@example.com" {
		t.Fatal("changing a looked-up tool changed the registry")
	}
	if plain := mustLookup(t, r, "post_update"); plain.Approval != nil || plain.Approval.RequiredApprovals() != 1 || !plain.Approval.BulkAllowed() {
		t.Fatalf("a tool without approval: Approval = %+v", plain.Approval)
	}
	var names []string
	for _, c := range r.Channels() {
		names = append(names, c.Name+"="+c.Kind())
	}
	if got := strings.Join(names, " "); got != "escalations=webhook leads-mail=email ops-events=webhook support-slack=slack" {
		t.Fatalf("Channels() = %s", got)
	}
}

func TestApprovalMayDecide(t *testing.T) {
	t.Parallel()
	r := mustParse(t, routingFile, allSet)
	a := mustLookup(t, r, "send_customer_email").Approval
	tests := []struct {
		email     string
		escalated bool
		want      bool
	}{
		{"ann@example.com", false, true},
		{"BOB@example.com", false, true},
		{"cara@example.com", false, false},
		{"cara@example.com", true, true},
		{"dave@example.com", true, false},
	}
	for _, tt := range tests {
		if got := a.MayDecide(Person{Email: tt.email}, tt.escalated); got != tt.want {
			t.Errorf("MayDecide(%q, escalated %v) = %v, want %v", tt.email, tt.escalated, got, tt.want)
		}
	}
	var none *Approval
	if !none.MayDecide(Person{Email: "anyone@example.com"}, false) {
		t.Error("without a rule anyone (with the role) may decide")
	}
}

// A group may name identity provider groups beside emails: the snapshot
// keeps them apart, and a person in one of them (as of their last sign-in)
// may decide, as an email in the list would.
func TestApprovalIdPGroups(t *testing.T) {
	t.Parallel()
	r := mustParse(t, `
groups:
  support-leads: [ann@example.com, "idp:support-leads", "idp:Support Leads EU"]
  night-shift: ["idp:night-shift"]
tools:
  send_customer_email:
    class: at-most-once
    approval:
      approvers: [support-leads]
      required: 5
      escalate_after: 1h
      escalate_to: [night-shift]
`, allSet)
	a := mustLookup(t, r, "send_customer_email").Approval
	if got := strings.Join(a.ApproverEmails, ","); got != "ann@example.com" {
		t.Fatalf("ApproverEmails = %s", got)
	}
	if got := strings.Join(a.ApproverIdPGroups, ","); got != "Support Leads EU,support-leads" {
		t.Fatalf("ApproverIdPGroups = %s", got)
	}
	if got := strings.Join(a.EscalateIdPGroups, ","); got != "night-shift" {
		t.Fatalf("EscalateIdPGroups = %s", got)
	}
	if a.CountsPeople() {
		t.Fatal("CountsPeople() = true with identity provider groups among the approvers")
	}
	tests := []struct {
		name      string
		p         Person
		escalated bool
		want      bool
	}{
		{"email listed", Person{Email: "ann@example.com"}, false, true},
		{"in an idp group", Person{Email: "zoe@example.com", IdPGroups: []string{"staff", "support-leads"}}, false, true},
		{"idp group names compare exactly", Person{Email: "zoe@example.com", IdPGroups: []string{"Support-Leads"}}, false, false},
		{"a group name with spaces", Person{Email: "zoe@example.com", IdPGroups: []string{"Support Leads EU"}}, false, true},
		{"in no group", Person{Email: "zoe@example.com", IdPGroups: []string{"staff"}}, false, false},
		{"no groups at all", Person{Email: "zoe@example.com"}, false, false},
		{"escalation group before escalation", Person{Email: "yan@example.com", IdPGroups: []string{"night-shift"}}, false, false},
		{"escalation group once escalated", Person{Email: "yan@example.com", IdPGroups: []string{"night-shift"}}, true, true},
		// An email that looks like a group is an email.
		{"an email is no group", Person{Email: "support-leads"}, false, false},
	}
	for _, tt := range tests {
		if got := a.MayDecide(tt.p, tt.escalated); got != tt.want {
			t.Errorf("%s: MayDecide(%+v, escalated %v) = %v, want %v", tt.name, tt.p, tt.escalated, got, tt.want)
		}
	}
	// The snapshot keeps the groups across the JSON an action stores.
	raw, _ := json.Marshal(a)
	var back Approval
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, a) {
		t.Fatalf("after a JSON round trip %+v, want %+v", back, a)
	}
}

func TestIdPGroupMembersRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ member, want string }{
		{`"idp:"`, `names no identity provider group`},
		{`"idp:   "`, `names no identity provider group`},
		{`"idp:` + strings.Repeat("g", 257) + `"`, `at most 256 are allowed`},
	} {
		_, err := Parse([]byte("groups:\n  leads: ["+tc.member+"]\ntools:\n  t:\n    class: at-most-once\n"), allSet)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("member %s: err = %v, want one saying %q", tc.member, err, tc.want)
		}
	}
}

func TestChannelsFor(t *testing.T) {
	t.Parallel()
	r := mustParse(t, routingFile, allSet)
	tool := mustLookup(t, r, "send_customer_email")
	other := mustLookup(t, r, "post_update")
	tests := []struct {
		event string
		tool  Tool
		want  string
	}{
		{EventActionPending, tool, "leads-mail support-slack"},
		{EventActionReminder, tool, "leads-mail support-slack"},
		{EventActionApproved, tool, "leads-mail support-slack"},
		{EventActionChangesRequested, tool, "leads-mail support-slack"},
		{EventActionCancelled, tool, "leads-mail support-slack"},
		{EventActionEscalated, tool, "escalations"},
		{EventActionDone, tool, ""},
		{EventActionFailed, tool, "ops-events"},
		{EventActionFailed, other, "ops-events"},
		{EventTicketOpened, other, "ops-events"},
		{EventActionPending, other, ""},
	}
	for _, tt := range tests {
		var names []string
		for _, c := range r.ChannelsFor(tt.event, tt.tool) {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, " "); got != tt.want {
			t.Errorf("ChannelsFor(%s, %s) = %q, want %q", tt.event, tt.tool.Name, got, tt.want)
		}
		if got := r.Notifies(tt.event, tt.tool); got != (tt.want != "") {
			t.Errorf("Notifies(%s, %s) = %v, but ChannelsFor gives %q", tt.event, tt.tool.Name, got, tt.want)
		}
	}
	// Outcomes reach only the channels subscribed to them, whatever the
	// tool: queue.Service.unrouted judges them without the action (an empty
	// Tool), which must give what every real tool gives.
	for _, ev := range []string{EventActionDone, EventActionFailed} {
		want := fmt.Sprint(r.ChannelsFor(ev, Tool{}))
		for _, tl := range []Tool{tool, other} {
			if got := fmt.Sprint(r.ChannelsFor(ev, tl)); got != want {
				t.Errorf("ChannelsFor(%s, %s) = %s, but %s without a tool: outcomes must not depend on it", ev, tl.Name, got, want)
			}
		}
	}
}

func TestParseRejectsBadRouting(t *testing.T) {
	t.Parallel()
	tool := func(approval string) string {
		return "groups:\n  leads: [ann@example.com, bob@example.com]\n  night: [cara@example.com]\n" +
			"channels:\n  slack: { slack: { channel: C1 } }\n  mail: { email: { to: [x@example.com] } }\n" +
			"tools:\n  t:\n    class: at-most-once\n    approval:\n" + approval
	}
	tests := []struct {
		name string
		src  string
		opts Options
		want []string // every fragment must be in the error
	}{
		{"unknown group", tool("      approvers: [leeds]\n"), allSet, []string{`tool "t"`, `"approval.approvers"`, `unknown group "leeds"`}},
		{"unknown channel", tool("      notify: [slak]\n"), allSet, []string{`tool "t"`, `"approval.notify"`, `unknown channel "slak"`}},
		{"required too large", tool("      approvers: [leads]\n      required: 3\n"), allSet, []string{`tool "t"`, `"approval.required"`, "only 2"}},
		{"required counts escalate_to", tool("      approvers: [leads]\n      required: 4\n      escalate_after: 1h\n      escalate_to: [night]\n"), allSet, []string{`"approval.required"`, "only 3"}},
		{"required zero", tool("      required: 0\n"), allSet, []string{`"approval.required"`, "at least 1"}},
		{"required not a number", tool("      required: two\n"), allSet, []string{`"approval.required"`}},
		{"unknown key", tool("      aprovers: [leads]\n"), allSet, []string{`tool "t"`, `unknown key "aprovers"`}},
		{"escalate without when", tool("      approvers: [leads]\n      escalate_to: [night]\n"), allSet, []string{`"approval.escalate_after"`}},
		{"escalate_after alone", tool("      escalate_after: 1h\n"), allSet, []string{`"approval.escalate_after"`}},
		{"bad duration", tool("      remind_after: soon\n"), allSet, []string{`"approval.remind_after"`}},
		{"bulk not bool", tool("      bulk: maybe\n"), allSet, []string{`"approval.bulk"`}},
		{"at-least-once", "tools:\n  t:\n    class: at-least-once\n    approval: { required: 1 }\n", allSet, []string{`tool "t"`, `"approval"`, "not allowed on at-least-once tools"}},
		{"slack unconfigured", tool("      notify: [slack]\n"), Options{SMTPConfigured: true}, []string{`channel "slack"`, "APPROVALS_SLACK_BOT_TOKEN"}},
		{"smtp unconfigured", tool("      notify: [mail]\n"), Options{SlackConfigured: true}, []string{`channel "mail"`, "APPROVALS_SMTP_URL"}},
		{"webhook unsigned", "channels:\n  hook: { webhook: \"http://x/y\" }\ntools: {}\n", Options{}, []string{`channel "hook"`, `field "secret"`, "its own secret"}},
		{"webhook secret unset", "channels:\n  hook: { webhook: \"http://x/y\", secret: \"${NOPE}\" }\ntools: {}\n", Options{LookupEnv: func(string) (string, bool) { return "", false }}, []string{`channel "hook"`, "NOPE is not set"}},
		{"secret on slack", "channels:\n  s: { slack: { channel: C1 }, secret: x }\ntools: {}\n", allSet, []string{`channel "s"`, "only a webhook channel has a secret"}},
		{"channel signs as APPROVALS_WEBHOOK_SECRET", "channels:\n  hook: { webhook: \"http://x/y\", secret: \"${OPS}\" }\ntools: {}\n",
			Options{WebhookSecretSet: true, WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("same key")), LookupEnv: func(string) (string, bool) { return "same key", true }},
			[]string{`channel "hook"`, "signs as APPROVALS_WEBHOOK_SECRET does"}},
		{"channel signs as an executor", "channels:\n  hook: { webhook: \"http://x/y\", secret: k1 }\ntools:\n  mail:\n    executor: { webhook: \"http://m/send\", secret: k1 }\n", Options{},
			[]string{`channel "hook"`, `signs as the executor secret of tool "mail" does`}},
		{"two kinds", "channels:\n  c: { webhook: \"http://x/y\", secret: events-secret, email: { to: [a@b.c] } }\ntools: {}\n", allSet, []string{`channel "c"`, "exactly one"}},
		{"unknown event", "channels:\n  c: { webhook: \"http://x/y\", secret: events-secret, events: [action.exploded] }\ntools: {}\n", allSet, []string{`channel "c"`, `"events"`, "action.exploded"}},
		{"bad email", "groups:\n  g: [not-an-email]\ntools: {}\n", allSet, []string{`group "g"`, "not an email"}},
		{"empty group", "groups:\n  g: []\ntools: {}\n", allSet, []string{`group "g"`, "at least one"}},
		{"email without to", "channels:\n  c: { email: {} }\ntools: {}\n", allSet, []string{`channel "c"`, `"email.to"`}},
		{"unknown top-level", "grups: {}\ntools: {}\n", allSet, []string{`unknown top-level key "grups"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), tt.opts)
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.src)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
