package upstream

import (
	"strings"
	"testing"
	"time"
)

// A verifier reads an upstream tool's structuredContent, and an upstream
// that does not answer is an error, never an answer.
func TestCallRead(t *testing.T) {
	t.Parallel()
	ts, calls, _ := startHTTPUpstream(t, "s3cret")
	ups := parseUpstreams(t, `
upstreams:
  crm:
    url: `+ts.URL+`
    headers: { Authorization: "Bearer ${CRM_TOKEN}" }
    timeout: 300ms
`, map[string]string{"CRM_TOKEN": "s3cret"})
	m := Start(t.Context(), ups, Options{ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = m.Close() })

	got, err := m.CallRead(t.Context(), "crm", "echo", map[string]any{"to": "ann"})
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("echo: %s, %v", got, err)
	}
	if calls.get("echo") != 1 {
		t.Fatalf("echo called %d times", calls.get("echo"))
	}
	for tool, want := range map[string]string{"refuse": "card declined", "hang": "unknown", "no_such_tool": "failed"} {
		if _, err := m.CallRead(t.Context(), "crm", tool, map[string]any{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", tool, err, want)
		}
	}
}
