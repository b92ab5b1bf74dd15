package upstream

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
)

// The reference MCP server from npm, pinned so that its tool list is stable.
const (
	everythingPackage = "@modelcontextprotocol/server-everything"
	everythingVersion = "2026.8.31"
)

// everythingEntry returns the path of server-everything's entry point, installing it with
// npm into the user's cache directory the first time. APPROVALS_SERVER_EVERYTHING names an
// installation directory instead (scripts/test sets it). Without node the test is skipped,
// except in CI, where a missing node is a broken build.
func everythingEntry(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("APPROVALS_SERVER_EVERYTHING")
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed, and CI must run the test against %s", everythingPackage)
		}
		t.Skipf("node is not installed: skipping the test against %s (install node and npm to run it)", everythingPackage)
	}
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no cache directory to install %s into: %v", everythingPackage, err)
		}
		dir = filepath.Join(cache, "approvals-test", "server-everything-"+everythingVersion)
	}
	entry := filepath.Join(dir, "node_modules", everythingPackage, "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return entry
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", everythingPackage+"@"+everythingVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s into %s: %v\n%s", everythingPackage, everythingVersion, dir, err, out)
	}
	return entry
}

func TestServerEverythingOverStdio(t *testing.T) {
	t.Parallel()
	entry := everythingEntry(t)
	r, err := classify.Parse([]byte(`
upstreams:
  ev:
    command: [node, `+entry+`, stdio]
    import: all
    trust_annotations: true
tools:
  ev_get-sum:
    class: exactly-once
`), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := Start(t.Context(), r.Upstreams(), Options{ConnectTimeout: 60 * time.Second})
	t.Cleanup(func() { _ = m.Close() })
	listings := m.Listings()
	if l := listings["ev"]; l.Unavailable != "" || len(l.Tools) < 5 {
		t.Fatalf("server-everything listing: %d tools, unavailable %q", len(l.Tools), l.Unavailable)
	}

	// Its real schemas and annotations go through the same import as the file's tools.
	merged, err := r.Import(listings)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	echo, ok := merged.Lookup("ev_echo")
	if !ok || echo.Unavailable != "" || echo.Class != classify.AtLeastOnce || !strings.Contains(echo.Reason, "upstream ev's annotations: readOnlyHint") ||
		!strings.Contains(string(echo.Schema), `"message"`) || echo.UpstreamTool != "echo" {
		t.Fatalf("ev_echo = %+v", echo)
	}
	if sum, _ := merged.Lookup("ev_get-sum"); sum.Class != classify.ExactlyOnce || sum.UpstreamTool != "get-sum" || sum.Unavailable != "" {
		t.Fatalf("ev_get-sum = %+v; want the file's class over the upstream's tool", sum)
	}
	for _, tool := range merged.Tools() {
		if tool.Unavailable != "" {
			t.Errorf("%s unavailable: %s", tool.Name, tool.Unavailable)
		}
	}

	o := m.Call(t.Context(), "ev", "echo", json.RawMessage(`{"message":"hello"}`))
	if o.Kind != Done || !strings.Contains(string(o.Result), "Echo: hello") {
		t.Fatalf("echo = %+v", o)
	}
	if o := m.Call(t.Context(), "ev", "get-sum", json.RawMessage(`{"a":"x"}`)); o.Kind != Failed || o.Error == "" {
		t.Fatalf("get-sum with bad arguments = %+v; want failed with the upstream's text", o)
	}
}
