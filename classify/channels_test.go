package classify_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
)

// The channels of section 17 parse into their kinds; their credentials (a Teams URL, a
// PagerDuty routing key) come from the environment and are never encoded; what is wrong is
// named by channel and field, never by the Teams URL.
func TestNewChannelKinds(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TEAMS_URL": "https://prod-1.westus.logic.azure.com/workflows/SECRET", "PD_KEY": "R0UTINGKEY0123456789abcdef"}
	opts := classify.Options{TelegramConfigured: true, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	reg, err := classify.Parse([]byte(`
channels:
  t: { teams: { webhook: "${TEAMS_URL}" } }
  tg: { telegram: { chat_id: -1001234 } }
  tg-name: { telegram: { chat_id: "@approvals_ops" } }
  pd: { pagerduty: { routing_key: "${PD_KEY}" }, events: [ticket.opened] }
tools: {}
`), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t": classify.KindTeams, "tg": classify.KindTelegram, "tg-name": classify.KindTelegram, "pd": classify.KindPagerDuty}
	for name, kind := range want {
		c, ok := reg.Channel(name)
		if !ok || c.Kind() != kind {
			t.Fatalf("channel %s: %+v, want kind %s", name, c, kind)
		}
	}
	tm, _ := reg.Channel("t")
	tg, _ := reg.Channel("tg")
	pd, _ := reg.Channel("pd")
	if tm.Teams.Webhook != env["TEAMS_URL"] || tg.Telegram.ChatID != "-1001234" || pd.PagerDuty.RoutingKey != env["PD_KEY"] {
		t.Fatalf("settings %+v %+v %+v", tm.Teams, tg.Telegram, pd.PagerDuty)
	}
	if tg.Address() != "-1001234" || pd.Address() != "pd" || tm.Address() != "t" {
		t.Fatalf("addresses %q %q %q", tg.Address(), pd.Address(), tm.Address())
	}
	for _, c := range []classify.Channel{tm, pd} {
		if b := mustJSON(t, c); strings.Contains(b, "SECRET") || strings.Contains(b, "R0UTINGKEY") {
			t.Fatalf("a credential is encoded: %s", b)
		}
	}

	for _, tc := range []struct{ file, want string }{
		{"t: { teams: { webhook: \"not a url/SECRETPATH\" } }", `channel "t", field "teams.webhook"`},
		{"t: { teams: {} }", "needs the Workflows webhook URL"},
		{"t: { teams: { webhook: \"${NOPE}\" } }", "NOPE is not set"},
		{"tg: { telegram: { chat_id: \"general\" } }", `"general" is not a Telegram chat id`},
		{"pd: { pagerduty: { routing_key: \"${NOPE}\" } }", "NOPE is not set"},
		{"pd: { pagerduty: {} }", "needs the Events API v2 integration key"},
		{"x: { teams: { webhook: \"https://a.example\" }, telegram: { chat_id: \"1\" } }", "needs exactly one of slack, email, webhook, teams, telegram or pagerduty"},
		{"x: { pagerduty: { routing_key: k }, secret: s }", "only a webhook channel has a secret"},
	} {
		_, err := classify.Parse([]byte("channels:\n  "+tc.file+"\ntools: {}\n"), opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRETPATH") {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
	if _, err := classify.Parse([]byte("channels:\n  tg: { telegram: { chat_id: \"-1\" } }\ntools: {}\n"), classify.Options{}); err == nil ||
		!strings.Contains(err.Error(), "APPROVALS_TELEGRAM_BOT_TOKEN and APPROVALS_TELEGRAM_SECRET") {
		t.Errorf("a Telegram channel without its settings: %v", err)
	}
}

// A decision and a ticket's resolution follow up on what was sent; nothing else does.
func TestFollowsUp(t *testing.T) {
	t.Parallel()
	for _, typ := range append(classify.EventTypes, classify.EventTicketResolved) {
		want := map[string]bool{classify.EventActionApproved: true, classify.EventActionRejected: true, classify.EventActionChangesRequested: true,
			classify.EventActionExpired: true, classify.EventActionCancelled: true, classify.EventTicketResolved: true,
			classify.EventPlanApproved: true, classify.EventPlanRejected: true, classify.EventPlanChangesRequested: true,
			classify.EventPlanCancelled: true, classify.EventPlanExpired: true}[typ]
		if classify.FollowsUp(typ) != want {
			t.Errorf("FollowsUp(%s) = %v, want %v", typ, !want, want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
