package classify

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSchemaRefusesIntentKeyProperty(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`tools:
  send:
    intent: "x:{id}"
    schema: { type: object, properties: { id: { type: string }, intent_key: { type: string } } }
`), Options{})
	if err == nil || !strings.Contains(err.Error(), `"intent_key" is reserved`) {
		t.Fatalf("err = %v; want the reserved intent_key property refused", err)
	}
}

// Over MCP every guarded tool takes a plan argument beside intent_key, and
// neither is part of the payload: a payload field named plan (a billing
// tool's "plan": "pro") would be taken for a plan's id, so every MCP call of
// the tool would be refused while REST accepted it. The name is reserved, in
// the tools file's schemas and in an upstream's alike.
func TestSchemaRefusesPlanProperty(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`tools:
  subscribe:
    intent: "sub:{id}"
    schema: { type: object, properties: { id: { type: string }, plan: { type: string } } }
`), Options{})
	if err == nil || !strings.Contains(err.Error(), `"plan" is reserved`) {
		t.Fatalf("err = %v; want the reserved plan property refused", err)
	}
	r, err := Parse([]byte("upstreams:\n  billing:\n    url: http://billing/mcp\n    import: [subscribe]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Import(map[string]UpstreamListing{"billing": {Tools: []UpstreamTool{
		{Name: "subscribe", InputSchema: json.RawMessage(`{"type":"object","properties":{"plan":{"type":"string"}}}`)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Lookup("billing_subscribe"); !strings.Contains(got.Unavailable, `"plan" is reserved`) {
		t.Errorf("imported tool with a plan property: unavailable %q; want the reserved plan property named", got.Unavailable)
	}
}
