package classify_test

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://hooks.example.com/refund", "https://hooks.example.com/refund"},
		{"https://hooks.example.com/r?order=5&page=2", "https://hooks.example.com/r?order=5&page=2"},
		{"https://bob:hunter2@hooks.example.com/r", "https://REDACTED@hooks.example.com/r"},
		{"https://ghp_abc123@hooks.example.com/r", "https://REDACTED@hooks.example.com/r"},
		{"https://h.example.com/r?token=abc", "https://h.example.com/r?token=REDACTED"},
		{"https://h.example.com/r?access_token=abc&order=5", "https://h.example.com/r?access_token=REDACTED&order=5"},
		{"https://h.example.com/r?API_KEY=abc", "https://h.example.com/r?API_KEY=REDACTED"},
		{"https://h.example.com/r?client_secret=abc", "https://h.example.com/r?client_secret=REDACTED"},
		{"https://h.example.com/r?password=abc", "https://h.example.com/r?password=REDACTED"},
		{"https://h.example.com/r?sig=abc&sv=1", "https://h.example.com/r?sig=REDACTED&sv=1"},
		{"https://u:p@h.example.com/r?key=a&key=b", "https://REDACTED@h.example.com/r?key=REDACTED&key=REDACTED"},
		{"https://h.example.com/r?token=a%zz", "https://h.example.com/r?REDACTED"},
		{"http://[::1:bad/?token=x", "REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got := classify.RedactURL(tt.in)
			if got != tt.want {
				t.Fatalf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, secret := range []string{"hunter2", "ghp_abc123", "abc"} {
				if strings.Contains(got, secret) {
					t.Fatalf("RedactURL(%q) = %q still shows %s", tt.in, got, secret)
				}
			}
		})
	}
}

func TestRedactURLsIn(t *testing.T) {
	t.Parallel()
	in := `Post "https://bob:hunter2@h.example.com/r?token=abc": dial tcp 10.0.0.1:443: connection refused`
	want := `Post "https://REDACTED@h.example.com/r?token=REDACTED": dial tcp 10.0.0.1:443: connection refused`
	if got := classify.RedactURLsIn(in); got != want {
		t.Fatalf("RedactURLsIn:\n got %s\nwant %s", got, want)
	}
	inJSON := `{"webhook":"https://h.example.com/r?a=1\u0026token=abc"}`
	wantJSON := `{"webhook":"https://h.example.com/r?a=1\u0026token=REDACTED"}`
	if got := classify.RedactURLsIn(inJSON); got != wantJSON {
		t.Fatalf("RedactURLsIn in JSON:\n got %s\nwant %s", got, wantJSON)
	}
	if got := classify.RedactURLsIn("no url here"); got != "no url here" {
		t.Fatalf("RedactURLsIn changed plain text: %q", got)
	}
}

// URLs whose path is their credential are shown to staff other than admins
// with the path elided; admins see the path (credentials in the user part
// and query are redacted for everyone).
func TestShownURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, staff, admin string }{
		{"https://hooks.slack.com/services/T000/B000/XXXXSECRET", "https://hooks.slack.com/…", "https://hooks.slack.com/services/T000/B000/XXXXSECRET"},
		{"https://prod-12.westeurope.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01&sig=S3CRET",
			"https://prod-12.westeurope.logic.azure.com:443/…",
			"https://prod-12.westeurope.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01&sig=REDACTED"},
		{"https://default1234.56.environment.api.powerplatform.com/powerautomate/automations/direct/workflows/x/triggers/manual/paths/invoke", "https://default1234.56.environment.api.powerplatform.com/…", ""},
		{"https://contoso.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d", "https://contoso.webhook.office.com/…", ""},
		{"https://discord.com/api/webhooks/1/TOKEN", "https://discord.com/…", ""},
		{"https://mailer.internal/send", "https://mailer.internal/send", "https://mailer.internal/send"},
		{"https://evilhooks.slack.com.example/services/x", "https://evilhooks.slack.com.example/services/x", ""},
	} {
		if got := classify.ShownURL(tc.raw, false); got != tc.staff {
			t.Errorf("ShownURL(%s, staff) = %s, want %s", tc.raw, got, tc.staff)
		}
		if tc.admin != "" {
			if got := classify.ShownURL(tc.raw, true); got != tc.admin {
				t.Errorf("ShownURL(%s, admin) = %s, want %s", tc.raw, got, tc.admin)
			}
		}
	}
	text := `{"webhook":"https://hooks.slack.com/services/T/B/SECRET","other":"https://x.example/a"}`
	if got := classify.ShownURLsIn(text, false); strings.Contains(got, "SECRET") || !strings.Contains(got, "https://x.example/a") {
		t.Errorf("ShownURLsIn = %s", got)
	}
}
