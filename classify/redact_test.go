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
