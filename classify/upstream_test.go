package classify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestParseUpstreams(t *testing.T) {
	t.Parallel()
	src := `
upstreams:
  crm:
    url: https://user:secret@crm.example/mcp
    headers: { Authorization: "Bearer ${CRM_TOKEN}", X-Literal: "$HOME and ${CRM_TOKEN}" }
    timeout: 5s
    import: all
  files:
    command: [node, /opt/files/index.js, /srv]
    env: { API_KEY: "${FILES_KEY}" }
    import: [read_file, write_file]
    prefix: ""
tools:
  crm_send_email:
    upstream: crm
    intent: "email:{customer_id}"
  write:
    upstream: files
    upstream_tool: write_file
`
	r := mustParse(t, src, Options{LookupEnv: fakeEnv(map[string]string{"CRM_TOKEN": "t0k", "FILES_KEY": "k3y"})})
	ups := r.Upstreams()
	if len(ups) != 2 || ups[0].Name != "crm" || ups[1].Name != "files" {
		t.Fatalf("Upstreams() = %+v; want crm and files", ups)
	}
	crm, files := ups[0], ups[1]
	if crm.URL != "https://user:secret@crm.example/mcp" || crm.Transport() != "http" || crm.Timeout != 5*time.Second || !crm.ImportAll || crm.Prefix != "crm_" {
		t.Errorf("crm = %+v", crm)
	}
	if got := crm.Headers["Authorization"]; got != "Bearer t0k" {
		t.Errorf("Authorization = %q; want the variable expanded", got)
	}
	if got := crm.Headers["X-Literal"]; got != "$HOME and t0k" {
		t.Errorf("X-Literal = %q; want only ${VAR} expanded", got)
	}
	if files.Transport() != "stdio" || strings.Join(files.Command, " ") != "node /opt/files/index.js /srv" || files.Env["API_KEY"] != "k3y" ||
		files.Prefix != "" || files.ImportAll || strings.Join(files.Import, ",") != "read_file,write_file" || files.Timeout != DefaultUpstreamTimeout {
		t.Errorf("files = %+v", files)
	}
	send := mustLookup(t, r, "crm_send_email")
	if send.Upstream != "crm" || send.UpstreamTool != "send_email" || send.Unavailable == "" {
		t.Errorf("crm_send_email = %+v; want upstream tool send_email (prefix dropped), unavailable until listed", send)
	}
	if w := mustLookup(t, r, "write"); w.UpstreamTool != "write_file" {
		t.Errorf("write.UpstreamTool = %q", w.UpstreamTool)
	}
}

func TestParseUpstreamErrors(t *testing.T) {
	t.Parallel()
	env := fakeEnv(map[string]string{"SET": "x"})
	tests := []struct {
		name, src string
		want      []string
	}{
		{"missing variable", "upstreams:\n  crm:\n    url: http://h/mcp\n    headers: { Authorization: \"Bearer ${CRM_TOKEN}\" }\n",
			[]string{`upstream "crm"`, `"headers.Authorization"`, "CRM_TOKEN is not set"}},
		{"missing env variable", "upstreams:\n  f:\n    command: [x]\n    env: { K: \"${SET}${NOPE}\" }\n",
			[]string{`upstream "f"`, `"env.K"`, "NOPE is not set"}},
		{"neither", "upstreams:\n  crm:\n    timeout: 5s\n", []string{`upstream "crm"`, "needs url"}},
		{"both", "upstreams:\n  crm:\n    url: http://h/\n    command: [x]\n", []string{`upstream "crm"`, "both url and command"}},
		{"bad url keeps secret", "upstreams:\n  crm:\n    url: ftp://u:hunter2@h/\n", []string{`upstream "crm"`, `"url"`, "not an absolute http"}},
		{"unknown key", "upstreams:\n  crm:\n    url: http://h/\n    header: {}\n", []string{`upstream "crm"`, `unknown key "header"`}},
		{"bad import", "upstreams:\n  crm:\n    url: http://h/\n    import: some\n", []string{`upstream "crm"`, `"import"`, "all, or a list"}},
		{"bad timeout", "upstreams:\n  crm:\n    url: http://h/\n    timeout: soon\n", []string{`upstream "crm"`, `"timeout"`, "not a duration"}},
		{"empty command", "upstreams:\n  f:\n    command: []\n", []string{`upstream "f"`, `"command"`, "non-empty list"}},
		{"unknown upstream", "upstreams:\n  crm:\n    url: http://h/\ntools:\n  x:\n    upstream: crm2\n", []string{`tool "x"`, `"upstream"`, `"crm2"`, "known upstreams: crm"}},
		{"upstream_tool alone", "tools:\n  x:\n    upstream_tool: y\n", []string{`tool "x"`, `"upstream_tool"`, "no upstream"}},
		{"claim shorter than call", "upstreams:\n  crm:\n    url: http://h/\n    timeout: 2m\ntools:\n  x:\n    upstream: crm\n    claim_timeout: 1m\n", []string{`tool "x"`, "claim_timeout 1m0s must be longer than upstream crm's timeout 2m0s"}},
		{"webhook and upstream", "upstreams:\n  crm:\n    url: http://h/\ntools:\n  x:\n    upstream: crm\n    executor: { webhook: http://w/, secret: events-secret }\n", []string{`tool "x"`, "both a webhook executor and upstream"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.src), Options{LookupEnv: env, WebhookSecretSet: true})
			if err == nil {
				t.Fatalf("Parse succeeded; want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks the URL's password", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestImport(t *testing.T) {
	t.Parallel()
	src := `
upstreams:
  crm:
    url: http://crm/mcp
    import: all
    trust_annotations: true
  files:
    command: [files-server]
    import: [read_file, gone]
    prefix: fs_
    trust_annotations: true
  quiet:
    url: http://quiet/mcp
tools:
  crm_send_email:                 # override of an import: any field it sets wins
    intent: "email:{customer_id}"
    description: Send one email (reviewed).
  crm_delete_contact:             # class set: the upstream's annotations only explain
    class: exactly-once
  fs_write:                       # defined here, executed upstream, no import needed
    upstream: files
    upstream_tool: write_file
  quiet_ping:
    upstream: quiet
`
	r := mustParse(t, src, Options{})
	listings := map[string]UpstreamListing{
		"crm": {Tools: []UpstreamTool{
			{Name: "send_email", Description: "Send an email.", InputSchema: json.RawMessage(`{"type": "object", "properties": {"customer_id": {"type": "string"}}}`)},
			{Name: "lookup", Description: "Read a contact.", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: Annotations{ReadOnlyHint: ptr(true)}},
			{Name: "delete_contact", Annotations: Annotations{IdempotentHint: ptr(true)}},
			{Name: "touch", Annotations: Annotations{OpenWorldHint: ptr(false)}},
			{Name: "bad_schema", InputSchema: json.RawMessage(`{"type":"object","properties":{"intent_key":{}}}`)},
		}},
		"files": {Tools: []UpstreamTool{{Name: "read_file", Annotations: Annotations{ReadOnlyHint: ptr(true)}}, {Name: "write_file"}}},
		"quiet": {Unavailable: "dial tcp: connection refused"},
	}
	m, err := r.Import(listings)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	tests := []struct {
		name, upstreamTool string
		class              Class
		reason             string // substring
		unavailable        string // substring; "" means available
		description        string
		schema             string
	}{
		{"crm_send_email", "send_email", AtMostOnce, "upstream crm's annotations: openWorldHint is absent", "", "Send one email (reviewed).", `{"type":"object","properties":{"customer_id":{"type":"string"}}}`},
		{"crm_lookup", "lookup", AtLeastOnce, "upstream crm's annotations: readOnlyHint", "", "Read a contact.", `{"type":"object"}`},
		{"crm_delete_contact", "delete_contact", ExactlyOnce, "class set in the tools file (upstream crm's annotations alone would make it at-least-once)", "", "", ""},
		{"crm_touch", "touch", ExactlyOnce, "upstream crm's annotations: openWorldHint is false", "", "", ""},
		{"crm_bad_schema", "bad_schema", AtMostOnce, "upstream crm's", `"intent_key" is reserved`, "", ""},
		{"fs_read_file", "read_file", AtLeastOnce, "readOnlyHint", "", "", ""},
		{"fs_gone", "gone", AtMostOnce, "fail closed", "upstream files does not list tool gone", "", ""},
		{"fs_write", "write_file", AtMostOnce, "upstream files's annotations: openWorldHint is absent", "", "", ""},
		{"quiet_ping", "ping", AtMostOnce, "fail closed", "upstream quiet is unavailable: dial tcp: connection refused", "", ""},
	}
	for _, tc := range tests {
		got := mustLookup(t, m, tc.name)
		if got.UpstreamTool != tc.upstreamTool || got.Class != tc.class || !strings.Contains(got.Reason, tc.reason) ||
			got.Description != tc.description || string(got.Schema) != tc.schema || !got.Registered {
			t.Errorf("%s = upstream tool %q, class %s (%q), description %q, schema %s; want %q, %s (%q), %q, %s",
				tc.name, got.UpstreamTool, got.Class, got.Reason, got.Description, got.Schema, tc.upstreamTool, tc.class, tc.reason, tc.description, tc.schema)
		}
		if (tc.unavailable == "") != (got.Unavailable == "") || !strings.Contains(got.Unavailable, tc.unavailable) {
			t.Errorf("%s.Unavailable = %q; want %q", tc.name, got.Unavailable, tc.unavailable)
		}
	}
	if got := mustLookup(t, m, "crm_send_email"); got.Intent != "email:{customer_id}" {
		t.Errorf("override lost the file's intent: %q", got.Intent)
	}
	if _, ok := m.Lookup("fs_write_file"); ok {
		t.Errorf("fs_write_file imported; files imports only read_file and gone")
	}
	if before := mustLookup(t, r, "crm_send_email"); before.Description != "Send one email (reviewed)." || before.Upstream != "crm" || before.Unavailable == "" || len(before.Schema) != 0 {
		t.Errorf("Import changed the registry it was called on: %+v", before)
	}

	// The upstream comes back without a tool: the tool stays, unavailable, so its pending
	// actions can still be shown and rejected.
	listings["crm"] = UpstreamListing{Tools: []UpstreamTool{{Name: "lookup"}}}
	m2, err := r.Import(listings)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, m2, "crm_send_email"); !strings.Contains(got.Unavailable, "does not list tool send_email") {
		t.Errorf("after removal: %+v", got)
	}
	if _, ok := m2.Lookup("crm_touch"); ok {
		t.Errorf("crm_touch still imported after the upstream stopped listing it")
	}
}

// The registry with the upstreams' tools imported is the one the server
// runs on: it keeps the file's groups and channels, so that an event about
// an upstream tool (or any other) reaches the channels that hear of it.
func TestImportKeepsChannels(t *testing.T) {
	t.Parallel()
	r := mustParse(t, `
upstreams:
  crm: { url: "http://crm/mcp", import: all }
groups:
  leads: [ann@example.com]
channels:
  ops: { webhook: "http://ops.example/hook", secret: events-secret, events: [action.done, action.failed] }
  leads-hook: { webhook: "http://leads.example/hook", secret: events-secret }
tools:
  send_email:
    approval: { approvers: [leads], notify: [leads-hook] }
`, Options{WebhookSecretSet: true})
	m, err := r.Import(map[string]UpstreamListing{"crm": {Tools: []UpstreamTool{{Name: "lookup", Annotations: Annotations{ReadOnlyHint: ptr(true)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range m.Channels() {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != "leads-hook ops" {
		t.Fatalf("channels after Import: %v, want the file's (leads-hook ops)", names)
	}
	lookup := mustLookup(t, m, "crm_lookup")
	if got := m.ChannelsFor(EventActionDone, lookup); len(got) != 1 || got[0].Name != "ops" || !m.Notifies(EventActionDone, lookup) {
		t.Errorf("action.done of crm_lookup reaches %v, want ops", got)
	}
	if got := m.ChannelsFor(EventActionPending, mustLookup(t, m, "send_email")); len(got) != 1 || got[0].Name != "leads-hook" {
		t.Errorf("action.pending of send_email reaches %v, want leads-hook", got)
	}
}

func TestImportCollisions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		listings  map[string]UpstreamListing
		want      []string
	}{
		{"two upstreams", "upstreams:\n  a:\n    url: http://a/\n    import: all\n    prefix: x_\n  b:\n    url: http://b/\n    import: all\n    prefix: x_\n",
			map[string]UpstreamListing{"a": {Tools: []UpstreamTool{{Name: "send"}}}, "b": {Tools: []UpstreamTool{{Name: "send"}}}},
			[]string{`tool "x_send"`, "imported from upstream a tool send", "imported from upstream b tool send"}},
		{"file tool for another upstream", "upstreams:\n  a:\n    url: http://a/\n    import: all\n  b:\n    url: http://b/\ntools:\n  a_send:\n    upstream: b\n",
			map[string]UpstreamListing{"a": {Tools: []UpstreamTool{{Name: "send"}}}, "b": {Tools: []UpstreamTool{{Name: "send"}}}},
			[]string{`tool "a_send"`, "defined in the tools file for upstream b tool a_send", "imported from upstream a tool send"}},
		{"webhook tool", "upstreams:\n  a:\n    url: http://a/\n    import: all\ntools:\n  a_send:\n    executor: { webhook: http://w/, secret: events-secret }\n",
			map[string]UpstreamListing{"a": {Tools: []UpstreamTool{{Name: "send"}}}},
			[]string{`tool "a_send"`, "defined in the tools file", "imported from upstream a tool send"}},
		{"default claim shorter than call", "upstreams:\n  a:\n    url: http://a/\n    import: all\n    timeout: 10m\n",
			map[string]UpstreamListing{"a": {Tools: []UpstreamTool{{Name: "slow"}}}},
			[]string{`tool "a_slow"`, "claim_timeout 5m0s must be longer than upstream a's timeout 10m0s"}},
		{"reserved name", "upstreams:\n  a:\n    url: http://a/\n    import: [get_action]\n    prefix: \"\"\n",
			map[string]UpstreamListing{"a": {Tools: []UpstreamTool{{Name: "get_action"}}}},
			[]string{`tool "get_action"`, "imported from upstream a tool get_action", "MCP endpoint's own tools"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustParse(t, tc.src, Options{WebhookSecretSet: true})
			_, err := r.Import(tc.listings)
			if err == nil {
				t.Fatalf("Import succeeded; want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestToolJSONRoundTripsUpstreamFields(t *testing.T) {
	t.Parallel()
	in := Tool{Name: "crm_send", Class: AtMostOnce, Upstream: "crm", UpstreamTool: "send", ClaimTimeout: time.Minute}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"upstream":"crm","upstream_tool":"send"`) {
		t.Errorf("JSON %s lacks upstream and upstream_tool", js)
	}
	var out Tool
	if err := json.Unmarshal(js, &out); err != nil || out.Upstream != "crm" || out.UpstreamTool != "send" {
		t.Errorf("round trip: %+v, %v", out, err)
	}
}

// An upstream's annotations classify its tools only with trust_annotations: true; without
// it every imported tool is at-most-once unless its tools: entry pins class, and the reason
// says what the annotations alone would have made it.
func TestImportDistrustsAnnotations(t *testing.T) {
	t.Parallel()
	r := mustParse(t, `
upstreams:
  crm:
    url: http://crm/mcp
    import: all
tools:
  crm_invalidate:
    class: at-least-once
`, Options{})
	m, err := r.Import(map[string]UpstreamListing{"crm": {Tools: []UpstreamTool{
		{Name: "delete_record", Annotations: Annotations{IdempotentHint: ptr(true)}},
		{Name: "lookup", Annotations: Annotations{ReadOnlyHint: ptr(true)}},
		{Name: "touch", Annotations: Annotations{OpenWorldHint: ptr(false)}},
		{Name: "invalidate", Annotations: Annotations{OpenWorldHint: ptr(true)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Class{"crm_delete_record": AtMostOnce, "crm_lookup": AtMostOnce, "crm_touch": AtMostOnce, "crm_invalidate": AtLeastOnce} {
		got := mustLookup(t, m, name)
		if got.Class != want {
			t.Errorf("%s: %s (%s), want %s", name, got.Class, got.Reason, want)
		}
	}
	if got := mustLookup(t, m, "crm_delete_record"); !strings.Contains(got.Reason, "trust_annotations") || !strings.Contains(got.Reason, "at-least-once") {
		t.Errorf("reason %q does not say why, and what the annotations alone would make it", got.Reason)
	}
}

// prefix: "" with import: all would let an upstream take over any tools-file tool.
func TestEmptyPrefixWithImportAllRefused(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("upstreams:\n  a:\n    url: http://a/\n    import: all\n    prefix: \"\"\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), `upstream "a", field "prefix"`) {
		t.Fatalf("Parse = %v, want an error naming the prefix of upstream a", err)
	}
	if _, err := Parse([]byte("upstreams:\n  a:\n    url: http://a/\n    import: [x]\n    prefix: \"\"\n"), Options{}); err != nil {
		t.Fatalf("an empty prefix with a list of imports: %v", err)
	}
}

// A re-list never lowers a class: once listed as at-most-once, a tool stays so when its
// upstream's annotations later say more; a stricter class is taken at once; every change
// (and every tool added or removed) is in the changes to log.
func TestReimportNeverLowersAClass(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "upstreams:\n  crm:\n    url: http://crm/mcp\n    import: all\n    trust_annotations: true\n", Options{})
	listing := func(tools ...UpstreamTool) map[string]UpstreamListing {
		return map[string]UpstreamListing{"crm": {Tools: tools}}
	}
	first, changes, err := r.Reimport(nil, listing(UpstreamTool{Name: "delete_record"}, UpstreamTool{Name: "read", Annotations: Annotations{OpenWorldHint: ptr(false)}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].From != "" || changes[0].To != AtMostOnce {
		t.Fatalf("first import: changes %+v, want both tools added", changes)
	}
	// The upstream now claims delete_record is idempotent, and read read-only: lower classes.
	second, changes, err := r.Reimport(first, listing(
		UpstreamTool{Name: "delete_record", Annotations: Annotations{IdempotentHint: ptr(true)}},
		UpstreamTool{Name: "read", Annotations: Annotations{ReadOnlyHint: ptr(true)}},
		UpstreamTool{Name: "added_later"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, second, "crm_delete_record"); got.Class != AtMostOnce || !strings.Contains(got.Reason, "never lowers") {
		t.Fatalf("crm_delete_record after a re-list: %s (%s), want at-most-once kept", got.Class, got.Reason)
	}
	if got := mustLookup(t, second, "crm_read"); got.Class != ExactlyOnce {
		t.Fatalf("crm_read after a re-list: %s (%s), want exactly-once kept", got.Class, got.Reason)
	}
	if len(changes) != 1 || changes[0].Tool != "crm_added_later" || changes[0].From != "" {
		t.Fatalf("changes %+v, want only crm_added_later added", changes)
	}
	// Raising is taken at once, and logged; the floor stays raised.
	third, changes, err := r.Reimport(second, listing(UpstreamTool{Name: "read", Annotations: Annotations{OpenWorldHint: ptr(true)}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, third, "crm_read"); got.Class != AtMostOnce {
		t.Fatalf("crm_read raised: %s", got.Class)
	}
	want := []ClassChange{{Tool: "crm_added_later", From: AtMostOnce}, {Tool: "crm_delete_record", From: AtMostOnce}, {Tool: "crm_read", From: ExactlyOnce, To: AtMostOnce}}
	if len(changes) != len(want) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	for i, c := range changes {
		if c.Tool != want[i].Tool || c.From != want[i].From || c.To != want[i].To {
			t.Fatalf("changes %+v, want %+v", changes, want)
		}
	}
	fourth, _, err := r.Reimport(third, listing(UpstreamTool{Name: "read", Annotations: Annotations{ReadOnlyHint: ptr(true)}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, fourth, "crm_read"); got.Class != AtMostOnce {
		t.Fatalf("crm_read lowered after being raised: %s", got.Class)
	}
}

// A class learnt from a listing survives the listings in between: a trusted upstream that
// drops a tool (so that it is gone, or kept unavailable as not listed) and lists it again
// with lower annotations, or goes down and comes back, gets the class it had; only a changed
// tools file (another Hash, or no earlier registry: a restart) starts from the listing.
func TestReimportKeepsAClassAcrossADroppedTool(t *testing.T) {
	t.Parallel()
	src := "upstreams:\n  crm:\n    url: http://crm/mcp\n    import: all\n    trust_annotations: true\n" +
		"tools:\n  crm_pay:\n    description: Pay an invoice.\n"
	r := mustParse(t, src, Options{})
	listing := func(tools ...UpstreamTool) map[string]UpstreamListing {
		return map[string]UpstreamListing{"crm": {Tools: tools}}
	}
	pay := UpstreamTool{Name: "pay", Annotations: Annotations{OpenWorldHint: ptr(false)}} // exactly-once
	send := UpstreamTool{Name: "send"}                                                    // at-most-once
	lower := listing(UpstreamTool{Name: "pay", Annotations: Annotations{ReadOnlyHint: ptr(true)}},
		UpstreamTool{Name: "send", Annotations: Annotations{IdempotentHint: ptr(true)}})

	reg, _, err := r.Reimport(nil, listing(pay, send))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		listings map[string]UpstreamListing
	}{
		{"both dropped", listing()},
		{"upstream down", map[string]UpstreamListing{"crm": {Unavailable: "connection refused"}}},
		{"not listed at all", nil},
		{"listed again, lower", lower},
		{"listed again, lower, once more", lower},
	}
	for _, step := range steps {
		if reg, _, err = r.Reimport(reg, step.listings); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	if got := mustLookup(t, reg, "crm_pay"); got.Class != ExactlyOnce || !strings.Contains(got.Reason, "never lowers") {
		t.Fatalf("crm_pay listed again: %s (%s), want exactly-once kept", got.Class, got.Reason)
	}
	if got := mustLookup(t, reg, "crm_send"); got.Class != AtMostOnce || !strings.Contains(got.Reason, "never lowers") {
		t.Fatalf("crm_send listed again: %s (%s), want at-most-once kept", got.Class, got.Reason)
	}

	// A changed tools file (here: the same upstream, another description) starts over.
	changed := mustParse(t, strings.Replace(src, "Pay an invoice.", "Pay one invoice.", 1), Options{})
	fresh, _, err := changed.Reimport(reg, lower)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, fresh, "crm_pay"); got.Class != AtLeastOnce {
		t.Fatalf("crm_pay under a changed file: %s (%s), want at-least-once from the listing", got.Class, got.Reason)
	}
	if got := mustLookup(t, fresh, "crm_send"); got.Class != AtLeastOnce {
		t.Fatalf("crm_send under a changed file: %s (%s), want at-least-once from the listing", got.Class, got.Reason)
	}
}

// A tools-file approval rule (and so a policy) on an imported tool is never
// dropped by a trusted upstream's annotations: at-least-once takes none, so
// the tool stays at-most-once and its rules decide.
func TestImportKeepsAnApprovalRule(t *testing.T) {
	t.Parallel()
	r := mustParse(t, `
groups:
  finance: [fin@example.com]
upstreams:
  crm:
    url: http://crm/mcp
    trust_annotations: true
tools:
  crm_refund:
    upstream: crm
    approval:
      policy:
        - { name: large, when: 'payload.amount > 500', decide: human, approvers: [finance] }
  crm_lookup:
    upstream: crm
  crm_close:
    upstream: crm
    approval: { approvers: [finance] }
`, Options{})
	m, err := r.Import(map[string]UpstreamListing{"crm": {Tools: []UpstreamTool{
		{Name: "refund", Annotations: Annotations{ReadOnlyHint: ptr(true)}},
		{Name: "lookup", Annotations: Annotations{ReadOnlyHint: ptr(true)}},
		{Name: "close", Annotations: Annotations{OpenWorldHint: ptr(false)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	refund := mustLookup(t, m, "crm_refund")
	if refund.Class != AtMostOnce || !refund.HasPolicy() || !strings.Contains(refund.Reason, "approval") {
		t.Errorf("crm_refund: %s (%s), policy %v; want at-most-once with its policy, saying why", refund.Class, refund.Reason, refund.HasPolicy())
	}
	if v := refund.Evaluate(PolicyInput{Payload: map[string]any{"amount": json.Number("900")}}); v.Rule == nil || v.Rule.Name != "large" {
		t.Errorf("crm_refund: the rule did not decide: %+v", v)
	}
	if got := mustLookup(t, m, "crm_lookup"); got.Class != AtLeastOnce {
		t.Errorf("crm_lookup: %s, want at-least-once (no approval rule)", got.Class)
	}
	if got := mustLookup(t, m, "crm_close"); got.Class != ExactlyOnce {
		t.Errorf("crm_close: %s, want exactly-once (its annotations; an approval rule takes no class down)", got.Class)
	}
}
