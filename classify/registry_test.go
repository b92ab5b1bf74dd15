package classify

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string, opts Options) *Registry {
	t.Helper()
	r, err := Parse([]byte(src), opts)
	if err != nil {
		t.Fatalf("Parse: %v\nfile:\n%s", err, src)
	}
	return r
}

func mustLookup(t *testing.T, r *Registry, name string) Tool {
	t.Helper()
	tool, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q): not registered", name)
	}
	return tool
}

func TestLoadExampleFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "tools.example.yaml")
	r, err := Load(path, Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if r.Hash != hex.EncodeToString(sum[:]) {
		t.Fatalf("Hash = %q, want the hex SHA-256 of the file", r.Hash)
	}

	var names []string
	for _, tool := range r.Tools() {
		names = append(names, tool.Name)
	}
	want := "invalidate_cache issue_refund post_public_update send_customer_email"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("Tools() names = %q, want %q (sorted)", got, want)
	}

	tests := []struct {
		name         string
		class        Class
		intent       string
		claimTimeout time.Duration
		hasSchema    bool
	}{
		{"send_customer_email", AtMostOnce, "email:{customer_id}:{topic}", 10 * time.Minute, true},
		{"post_public_update", AtMostOnce, "post:{channel}:{slug}", DefaultClaimTimeout, false},
		{"issue_refund", ExactlyOnce, "refund:{order_id}:{line_id}", 2 * time.Minute, true},
		{"invalidate_cache", AtLeastOnce, "", DefaultClaimTimeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := mustLookup(t, r, tt.name)
			if tool.Class != tt.class || tool.Intent != tt.intent || tool.ClaimTimeout != tt.claimTimeout {
				t.Fatalf("got class %q intent %q claim_timeout %s, want %q %q %s", tool.Class, tool.Intent, tool.ClaimTimeout, tt.class, tt.intent, tt.claimTimeout)
			}
			if !tool.Registered || tool.Reason == "" || tool.ExpiresAfter != DefaultExpiresAfter {
				t.Fatalf("registered %v, reason %q, expires_after %s", tool.Registered, tool.Reason, tool.ExpiresAfter)
			}
			if tool.Executor != nil {
				t.Fatalf("executor = %+v, want none: the example must load without a webhook secret", tool.Executor)
			}
			if (len(tool.Schema) > 0) != tt.hasSchema {
				t.Fatalf("schema = %s, want present: %v", tool.Schema, tt.hasSchema)
			}
		})
	}

	email := mustLookup(t, r, "send_customer_email")
	for _, label := range []string{"title", "to", "body"} {
		if _, ok := email.Preview[label]; !ok {
			t.Fatalf("send_customer_email preview lacks %q: %v", label, email.Preview)
		}
	}
	if err := email.Validate(map[string]any{"customer_id": "c1", "topic": "welcome", "to": "a@example.com", "subject": "Hi"}); err == nil {
		t.Fatal("Validate without body: want an error")
	}
	refund := mustLookup(t, r, "issue_refund")
	if refund.Check == "" {
		t.Fatal("issue_refund has no check text")
	}
}

func TestClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		definition string
		class      Class
		reason     string // the whole reason
	}{
		{"no class, no annotations", `{}`, AtMostOnce, reasonOpenWorldAbsent},
		{"empty definition", ``, AtMostOnce, reasonOpenWorldAbsent},
		{"readOnlyHint", `{annotations: {readOnlyHint: true}}`, AtLeastOnce, reasonReadOnly},
		{"idempotentHint", `{annotations: {idempotentHint: true}}`, AtLeastOnce, reasonIdempotent},
		{"readOnly wins over openWorld", `{annotations: {readOnlyHint: true, openWorldHint: true}}`, AtLeastOnce, reasonReadOnly},
		{"idempotent despite closed world", `{annotations: {idempotentHint: true, openWorldHint: false}}`, AtLeastOnce, reasonIdempotent},
		{"openWorldHint true", `{annotations: {openWorldHint: true}}`, AtMostOnce, reasonOpenWorldTrue},
		{"false hints are absent hints", `{annotations: {readOnlyHint: false, idempotentHint: false}}`, AtMostOnce, reasonOpenWorldAbsent},
		{"openWorldHint false", `{annotations: {openWorldHint: false}}`, ExactlyOnce, reasonClosedWorld},
		{"class set", `{class: exactly-once}`, ExactlyOnce, "class set in the tools file (the annotations alone would make it at-most-once)"},
		{"class agrees with annotations", `{class: at-least-once, annotations: {readOnlyHint: true}}`, AtLeastOnce, "class set in the tools file"},
		{"class overrides annotations", `{class: at-most-once, annotations: {idempotentHint: true}}`, AtMostOnce, "class set in the tools file (the annotations alone would make it at-least-once)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := mustParse(t, "tools:\n  x: "+tt.definition+"\n", Options{})
			tool := mustLookup(t, r, "x")
			if tool.Class != tt.class {
				t.Fatalf("class = %q, want %q", tool.Class, tt.class)
			}
			if tool.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q", tool.Reason, tt.reason)
			}
		})
	}
}

func TestClassificationReasonsReadWell(t *testing.T) {
	t.Parallel()
	// The reasons are shown by `tools check`: they must say why, in the words the brief uses.
	for _, tt := range []struct{ reason, want string }{
		{reasonIdempotent, "idempotentHint is true, so repeating it is harmless"},
		{reasonOpenWorldAbsent, "cannot be taken back: a human approves it"},
		{reasonClosedWorld, "a write inside our own systems, claimed first"},
		{reasonUnregistered, "fail closed"},
	} {
		if !strings.Contains(tt.reason, tt.want) {
			t.Errorf("reason %q does not contain %q", tt.reason, tt.want)
		}
	}
}

// wantParseError parses src and requires an error containing every one of wants.
func wantParseError(t *testing.T, src string, opts Options, wants ...string) {
	t.Helper()
	_, err := Parse([]byte(src), opts)
	if err == nil {
		t.Fatalf("Parse succeeded, want an error containing %q\nfile:\n%s", wants, src)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

func TestParseRejectsUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   string
		wants []string
	}{
		{"tool key", "tools:\n  refund:\n    clas: exactly-once\n", []string{`tool "refund"`, `unknown key "clas"`, "line 3", "known keys: annotations"}},
		{"executor key", "tools:\n  mail:\n    executor: {url: http://x/}\n", []string{`tool "mail"`, `field "executor"`, `unknown key "url"`}},
		{"annotations key", "tools:\n  mail:\n    annotations: {destructiveHint: true}\n", []string{`tool "mail"`, `field "annotations"`, `unknown key "destructiveHint"`}},
		{"top-level key", "tool:\n  mail: {}\n", []string{`unknown top-level key "tool"`}},
		{"merged unknown key", "defaults: &d {clas: exactly-once}\ntools:\n  x: {<<: *d}\n", []string{`unknown top-level key "defaults"`}},
		{"unknown key via merge", "tools:\n  a: &d {annotations: {idempotentHint: true}}\n  b:\n    <<: *d\n    kind: x\n", []string{`tool "b"`, `unknown key "kind"`}},
		{"duplicate key", "tools:\n  x:\n    class: at-most-once\n    class: exactly-once\n", []string{`tool "x"`, `field "class"`, "twice"}},
		{"duplicate tool", "tools:\n  x: {}\n  x: {}\n", []string{`tool "x"`, "defined twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantParseError(t, tt.src, Options{WebhookSecretSet: true}, tt.wants...)
		})
	}
}

func TestParseRejectsBadFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		definition string
		wants      []string
	}{
		{"invalid class", `{class: once}`, []string{`field "class"`, `"once" is not a class`}},
		{"class not a string", `{class: [a]}`, []string{`field "class"`, "must be a string"}},
		{"hint not a boolean", `{annotations: {readOnlyHint: yes}}`, []string{`field "annotations.readOnlyHint"`, "true or false"}},
		{"definition not a mapping", `[a, b]`, []string{`tool "x"`, "must be a mapping"}},
		{"empty intent", `{intent: ""}`, []string{`field "intent"`, "empty template"}},
		{"intent without fields", `{intent: "deploy:prod"}`, []string{`field "intent"`, "names no {field}"}},
		{"unclosed brace", `{intent: "refund:{order_id"}`, []string{`tool "x"`, `field "intent"`, `unclosed "{"`}},
		{"brace inside field", `{intent: "refund:{order_{id}"}`, []string{`field "intent"`, `unclosed "{"`}},
		{"unmatched close", `{intent: "refund:order_id}"}`, []string{`field "intent"`, `unmatched "}"`}},
		{"empty field", `{intent: "refund:{}"}`, []string{`field "intent"`, "empty field name"}},
		{"empty path part", `{intent: "refund:{order..id}"}`, []string{`field "intent"`, "empty part"}},
		{"spaces in field", `{intent: "refund:{ order_id }"}`, []string{`field "intent"`, "spaces around"}},
		{"bad preview template", `{preview: {title: "{subject"}}`, []string{`field "preview.title"`, `unclosed "{"`}},
		{"preview not a mapping", `{preview: "{subject}"}`, []string{`field "preview"`, "must be a mapping"}},
		{"preview value a list", `{preview: {title: [a]}}`, []string{`field "preview.title"`, "must be a template string"}},
		{"schema invalid", `{schema: {type: 12}}`, []string{`tool "x"`, `field "schema"`, "not a valid JSON Schema"}},
		{"schema with infinity", `{schema: {maximum: .inf}}`, []string{`field "schema"`, "not a JSON number"}},
		{"schema alias bomb", "{schema: {a: &a [1,1,1,1,1,1,1,1,1,1], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]}}", []string{`field "schema"`, "too large"}},
		{"schema with external ref", `{schema: {$ref: "file:///etc/passwd"}}`, []string{`field "schema"`, "self-contained"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantParseError(t, "tools:\n  x: "+tt.definition+"\n", Options{}, tt.wants...)
		})
	}
}

func TestParseDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		definition string
		wants      []string // empty: valid
		claim      time.Duration
		expires    time.Duration
	}{
		{"defaults", `{}`, nil, 5 * time.Minute, 72 * time.Hour},
		{"set", `{claim_timeout: 90s, expires_after: 1h30m}`, nil, 90 * time.Second, 90 * time.Minute},
		{"no unit", `{claim_timeout: 600}`, []string{`tool "x"`, `field "claim_timeout"`, `"600" is not a duration`}, 0, 0},
		{"words", `{expires_after: 3 days}`, []string{`field "expires_after"`, "not a duration"}, 0, 0},
		{"zero", `{claim_timeout: 0s}`, []string{`field "claim_timeout"`, "longer than zero"}, 0, 0},
		{"negative", `{expires_after: -1h}`, []string{`field "expires_after"`, "longer than zero"}, 0, 0},
		{"empty", `{claim_timeout: ""}`, []string{`field "claim_timeout"`, "not a duration"}, 0, 0},
		{"executor timeout", `{executor: {webhook: "https://x.example/", timeout: soon}}`, []string{`field "executor.timeout"`, "not a duration"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "tools:\n  x: " + tt.definition + "\n"
			if len(tt.wants) > 0 {
				wantParseError(t, src, Options{WebhookSecretSet: true}, tt.wants...)
				return
			}
			tool := mustLookup(t, mustParse(t, src, Options{}), "x")
			if tool.ClaimTimeout != tt.claim || tool.ExpiresAfter != tt.expires {
				t.Fatalf("claim_timeout %s expires_after %s, want %s %s", tool.ClaimTimeout, tool.ExpiresAfter, tt.claim, tt.expires)
			}
		})
	}
}

func TestParseWebhookRules(t *testing.T) {
	t.Parallel()
	secret := Options{WebhookSecretSet: true}
	tests := []struct {
		name       string
		definition string
		opts       Options
		wants      []string      // empty: valid
		timeout    time.Duration // when valid
	}{
		{"default timeout is 30s", `{executor: {webhook: "http://127.0.0.1:9000/send"}}`, secret, nil, 30 * time.Second},
		{"default timeout is half a short claim", `{claim_timeout: 40s, executor: {webhook: "https://hooks.example/send"}}`, secret, nil, 20 * time.Second},
		{"explicit timeout", `{claim_timeout: 10m, executor: {webhook: "https://hooks.example/send", timeout: 2m}}`, secret, nil, 2 * time.Minute},
		{"timeout equal to claim", `{claim_timeout: 1m, executor: {webhook: "https://hooks.example/", timeout: 1m}}`, secret, []string{`field "executor.timeout"`, "shorter than claim_timeout"}, 0},
		{"no secret", `{executor: {webhook: "https://hooks.example/"}}`, Options{}, []string{`tool "x"`, "APPROVALS_WEBHOOK_SECRET"}, 0},
		{"exactly-once", `{class: exactly-once, executor: {webhook: "https://hooks.example/"}}`, secret, []string{`field "executor"`, "only on at-most-once tools", "exactly-once"}, 0},
		{"at-least-once by annotation", `{annotations: {readOnlyHint: true}, executor: {webhook: "https://hooks.example/"}}`, secret, []string{"only on at-most-once tools", "at-least-once"}, 0},
		{"relative URL", `{executor: {webhook: "/send"}}`, secret, []string{`field "executor.webhook"`, "absolute http or https URL"}, 0},
		{"ftp URL", `{executor: {webhook: "ftp://files.example/x"}}`, secret, []string{"absolute http or https URL"}, 0},
		{"no host", `{executor: {webhook: "http:///x"}}`, secret, []string{"absolute http or https URL"}, 0},
		{"executor without webhook", `{executor: {timeout: 10s}}`, secret, []string{`field "executor"`, "needs a webhook URL"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "tools:\n  x: " + tt.definition + "\n"
			if len(tt.wants) > 0 {
				wantParseError(t, src, tt.opts, tt.wants...)
				return
			}
			tool := mustLookup(t, mustParse(t, src, tt.opts), "x")
			if tool.Executor == nil || !tool.HasWebhook() {
				t.Fatalf("executor = %+v, want a webhook", tool.Executor)
			}
			if tool.Executor.Timeout != tt.timeout {
				t.Fatalf("executor timeout = %s, want %s", tool.Executor.Timeout, tt.timeout)
			}
			if !strings.Contains(tool.Guidance(), "never send it yourself") {
				t.Fatalf("Guidance() = %q, want the webhook note", tool.Guidance())
			}
		})
	}
}

func TestParseToolNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		valid bool
	}{
		{"send_customer_email", true},
		{"v2.refund-order", true},
		{"claude-code:Bash", true}, // the Claude Code hook's tools
		{"claude-code:mcp__github__create_issue", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"has space", false},
		{"émail", false},
		{"get_action", false}, // reserved for the MCP endpoint
		{"propose_plan", false},
		{"get_plan", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "tools:\n  \"" + tt.name + "\": {}\n"
			_, err := Parse([]byte(src), Options{})
			if tt.valid && err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !tt.valid && (err == nil || !strings.Contains(err.Error(), `tool "`)) {
				t.Fatalf("Parse error = %v, want one naming the tool", err)
			}
		})
	}
}

// A plain (unquoted) YAML key may hold ':' when no space follows it, as the
// tools file of docs/sdk.md's Claude Code section writes claude-code:Bash.
func TestParseToolNameWithColonUnquoted(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "tools:\n  claude-code:Bash:\n    class: at-most-once\n    intent: \"bash:{session_id}:{tool_input.command}\"\n    preview: { title: \"{tool_input.command}\" }\n  claude-code:Read:\n    annotations: { readOnlyHint: true }\n", Options{})
	bash := mustLookup(t, r, "claude-code:Bash")
	if bash.Class != AtMostOnce {
		t.Fatalf("claude-code:Bash class = %s, want at-most-once", bash.Class)
	}
	key, err := bash.DeriveKey(map[string]any{"session_id": "s1", "tool_input": map[string]any{"command": "git push"}})
	if err != nil || key != "bash:s1:git push" {
		t.Fatalf("DeriveKey = %q, %v; want bash:s1:git push", key, err)
	}
	if read := mustLookup(t, r, "claude-code:Read"); read.Class != AtLeastOnce {
		t.Fatalf("claude-code:Read class = %s, want at-least-once", read.Class)
	}
}

func TestParseFileShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   string
		tools int    // when valid
		want  string // error substring; "" means valid
	}{
		{"empty file", "", 0, "the file is empty"},
		{"comment only", "# nothing\n", 0, "the file is empty"},
		{"not YAML", "tools: [\n", 0, "not valid YAML"},
		{"list at top", "- a\n", 0, `expected a top-level "tools:" mapping`},
		{"tools a list", "tools: [a]\n", 0, `"tools" must be a mapping`},
		{"two documents", "tools: {}\n---\ntools: {}\n", 0, "more than one YAML document"},
		{"no tools", "tools:\n", 0, ""},
		{"empty tools", "tools: {}\n", 0, ""},
		{"merge keys", "tools:\n  a: &base {class: exactly-once, claim_timeout: 1m}\n  b:\n    <<: *base\n    claim_timeout: 2m\n", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := Parse([]byte(tt.src), Options{})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v, want one containing %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := len(r.Tools()); got != tt.tools {
				t.Fatalf("%d tools, want %d", got, tt.tools)
			}
		})
	}
	t.Run("merged values", func(t *testing.T) {
		t.Parallel()
		r := mustParse(t, "tools:\n  a: &base {class: exactly-once, claim_timeout: 1m}\n  b:\n    <<: *base\n    claim_timeout: 2m\n", Options{})
		b := mustLookup(t, r, "b")
		if b.Class != ExactlyOnce || b.ClaimTimeout != 2*time.Minute {
			t.Fatalf("b: class %q claim_timeout %s, want exactly-once (merged) and 2m (explicit wins)", b.Class, b.ClaimTimeout)
		}
	})
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	src := "tools:\n  a: {clas: x}\n  b: {claim_timeout: soon}\n  c: {}\n"
	_, err := Parse([]byte(src), Options{})
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `tool "a"`) || !strings.Contains(lines[1], `tool "b"`) {
		t.Fatalf("error lines = %q, want one for tool a, then one for tool b", lines)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(bad, []byte("tools:\n  a: {clas: x}\n  b: {class: y}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"invalid file", bad},
		{"missing file", filepath.Join(dir, "absent.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tt.path, Options{})
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.Contains(line, tt.path) {
					t.Fatalf("error line %q does not name the file %s", line, tt.path)
				}
			}
		})
	}
}

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "tools:\n  mail:\n    preview: {title: \"{subject}\"}\n", Options{})

	tool := mustLookup(t, r, "mail")
	tool.Preview["title"] = "changed"
	if again := mustLookup(t, r, "mail"); again.Preview["title"] != "{subject}" {
		t.Fatalf("changing a looked-up tool changed the registry: preview title = %q", again.Preview["title"])
	}

	tests := []struct {
		name string
		r    *Registry
	}{
		{"parsed", r},
		{"empty", Empty()},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.r.Lookup("unknown_tool")
			if ok {
				t.Fatal("Lookup of an unknown tool: ok = true")
			}
			if got.Name != "unknown_tool" || got.Class != AtMostOnce || got.Registered {
				t.Fatalf("Lookup of an unknown tool = %+v, want Unregistered", got)
			}
		})
	}
	if n := len(Empty().Tools()); n != 0 {
		t.Fatalf("Empty().Tools() has %d tools", n)
	}
}

func TestUnregistered(t *testing.T) {
	t.Parallel()
	tool := Unregistered("wire_money")
	if tool.Name != "wire_money" || tool.Class != AtMostOnce || tool.Registered {
		t.Fatalf("Unregistered = %+v", tool)
	}
	if tool.ClaimTimeout != DefaultClaimTimeout || tool.ExpiresAfter != DefaultExpiresAfter {
		t.Fatalf("timeouts %s %s, want the defaults", tool.ClaimTimeout, tool.ExpiresAfter)
	}
	if !strings.Contains(tool.Reason, "fail closed") || tool.Intent != "" || tool.Executor != nil {
		t.Fatalf("reason %q intent %q executor %v", tool.Reason, tool.Intent, tool.Executor)
	}
	if key, err := tool.DeriveKey(map[string]any{"a": "b"}); key != "" || err != nil {
		t.Fatalf("DeriveKey = %q, %v; want no derived key: the caller supplies it", key, err)
	}
	if !strings.Contains(tool.Guidance(), "execute_action") {
		t.Fatalf("Guidance() = %q, want the execute_action step", tool.Guidance())
	}
}
