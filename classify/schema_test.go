package classify

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const schemaTools = `tools:
  mail:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    preview: {title: "{subject}"}
    executor: {webhook: "https://hooks.example/send", timeout: 10s}
    annotations: {openWorldHint: true, idempotentHint: false}
    schema:
      type: object
      required: [customer_id, topic, to]
      additionalProperties: false
      properties:
        customer_id: {type: [string, integer]}
        topic: {type: string, enum: [welcome, invoice]}
        to: {type: string, format: email}
        note: {type: string, pattern: "^[^<>]*$"}
        address:
          type: object
          required: [zip]
          properties:
            zip: {type: string, minLength: 5}
        lines:
          type: array
          items: {type: object, properties: {qty: {type: integer, minimum: 1}}}
        contact: {anyOf: [{type: string}, {type: integer}]}
`

func TestValidate(t *testing.T) {
	t.Parallel()
	r := mustParse(t, schemaTools, Options{WebhookSecretSet: true})
	tool := mustLookup(t, r, "mail")
	tests := []struct {
		name    string
		payload string
		field   string // "" with reason "": valid
		reason  string
	}{
		{"valid", `{"customer_id":42,"topic":"welcome","to":"ada@example.com"}`, "", ""},
		{"valid nested", `{"customer_id":"c1","topic":"invoice","to":"a@b.example","address":{"zip":"10115"},"lines":[{"qty":2}]}`, "", ""},
		{"missing field", `{"topic":"welcome","to":"a@b.example"}`, "customer_id", "missing"},
		{"several missing", `{"to":"a@b.example"}`, "customer_id", "also missing: topic"},
		{"wrong type", `{"customer_id":true,"topic":"welcome","to":"a@b.example"}`, "customer_id", "got boolean, want"},
		{"enum", `{"customer_id":1,"topic":"spam","to":"a@b.example"}`, "topic", "must be one of"},
		{"format asserted", `{"customer_id":1,"topic":"welcome","to":"not an address"}`, "to", "email"},
		{"unknown property", `{"customer_id":1,"topic":"welcome","to":"a@b.example","cc":"x"}`, "cc", "not allowed"},
		{"nested missing", `{"customer_id":1,"topic":"welcome","to":"a@b.example","address":{}}`, "address.zip", "missing"},
		{"nested too short", `{"customer_id":1,"topic":"welcome","to":"a@b.example","address":{"zip":"1"}}`, "address.zip", "minLength"},
		{"array item", `{"customer_id":1,"topic":"welcome","to":"a@b.example","lines":[{"qty":1},{"qty":0}]}`, "lines.1.qty", "minimum"},
		{"fraction for integer", `{"customer_id":1,"topic":"welcome","to":"a@b.example","lines":[{"qty":1.5}]}`, "lines.0.qty", "want integer"},
		{"anyOf", `{"customer_id":1,"topic":"welcome","to":"a@b.example","contact":[]}`, "contact", "anyOf"},
		{"not an object", `[1]`, "", "want object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dec := json.NewDecoder(strings.NewReader(tt.payload))
			dec.UseNumber()
			var payload any
			if err := dec.Decode(&payload); err != nil {
				t.Fatal(err)
			}
			err := tool.Validate(payload)
			if tt.field == "" && tt.reason == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate = %v, want a *PayloadError", err)
			}
			if pe.Field != tt.field || !strings.Contains(pe.Reason, tt.reason) {
				t.Fatalf("PayloadError{Field: %q, Reason: %q}, want field %q and a reason containing %q", pe.Field, pe.Reason, tt.field, tt.reason)
			}
		})
	}
}

func TestValidateGoValues(t *testing.T) {
	t.Parallel()
	tool := mustLookup(t, mustParse(t, schemaTools, Options{WebhookSecretSet: true}), "mail")
	// float64 and int payloads (decoded without UseNumber, or built in Go) validate too.
	for _, id := range []any{float64(7), 7} {
		if err := tool.Validate(map[string]any{"customer_id": id, "topic": "welcome", "to": "a@b.example"}); err != nil {
			t.Fatalf("Validate with customer_id %T: %v", id, err)
		}
	}
	if err := (&Tool{}).Validate(map[string]any{"anything": true}); err != nil {
		t.Fatalf("Validate without a schema: %v", err)
	}
}

func TestToolJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := mustParse(t, schemaTools+"  plain: {}\n  cache: {annotations: {idempotentHint: true}}\n", Options{WebhookSecretSet: true})
	tools := append(r.Tools(), Unregistered("unknown_tool"))
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			t.Parallel()
			data, err := json.Marshal(tool)
			if err != nil {
				t.Fatal(err)
			}
			var back Tool
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tool) {
				t.Fatalf("round trip changed the tool:\n got %#v\nwant %#v\njson %s", back, tool, data)
			}
		})
	}

	// The snapshot still validates and derives keys, also under concurrent first use.
	mail := mustLookup(t, r, "mail")
	data, err := json.Marshal(mail)
	if err != nil {
		t.Fatal(err)
	}
	var snapshot Tool
	if err := json.Unmarshal(data, &snapshot); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = snapshot.Validate(map[string]any{"topic": "welcome", "to": "a@b.example"})
		})
	}
	wg.Wait()
	for _, err := range errs {
		var pe *PayloadError
		if !errors.As(err, &pe) || pe.Field != "customer_id" {
			t.Fatalf("Validate after unmarshal = %v, want a PayloadError for customer_id", err)
		}
	}
	if key, err := snapshot.DeriveKey(map[string]any{"customer_id": json.Number("42"), "topic": "welcome"}); err != nil || key != "email:42:welcome" {
		t.Fatalf("DeriveKey after unmarshal = %q, %v", key, err)
	}
}

func TestSchemaFromYAMLValues(t *testing.T) {
	t.Parallel()
	// An unquoted YAML date stays the text it was written as; integers and floats stay numbers; "<", ">" and "&" are
	// escaped as encoding/json escapes them, so the snapshot round-trips byte for byte.
	r := mustParse(t, `tools:
  x:
    schema:
      type: object
      properties:
        day: {const: 2024-05-01}
        n: {type: number, maximum: 2.5, minimum: 1}
        s: {type: string, pattern: "^<a>&$"}
`, Options{})
	tool := mustLookup(t, r, "x")
	want := `{"properties":{"day":{"const":"2024-05-01"},"n":{"maximum":2.5,"minimum":1,"type":"number"},"s":{"pattern":"^\u003ca\u003e\u0026$","type":"string"}},"type":"object"}`
	if string(tool.Schema) != want {
		t.Fatalf("schema JSON = %s\nwant %s", tool.Schema, want)
	}
}

// The compiled-schema cache does not grow with every distinct schema: an
// upstream that changes its schemas on each re-list would otherwise grow it
// for the life of the process.
func TestCompiledSchemaCacheBounded(t *testing.T) {
	for i := range 3 * maxCompiledSchemas {
		if err := compileSchema(json.RawMessage(fmt.Sprintf(`{"type":"object","description":"re-list %d"}`, i))).err; err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	compiledSchemas.Range(func(any, any) bool { n++; return true })
	if n > maxCompiledSchemas {
		t.Fatalf("%d schemas cached after %d distinct ones, want at most %d", n, 3*maxCompiledSchemas, maxCompiledSchemas)
	}
}

// A key that differs only in case from a property the schema names is
// refused, at any depth the schema names properties; other keys pass.
func TestValidateRefusesCaseTwins(t *testing.T) {
	t.Parallel()
	tool := Tool{Name: "mail", Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},` +
		`"address":{"type":"object","properties":{"zip":{"type":"string"}}}}}`)}
	for _, tc := range []struct{ payload, field string }{
		{`{"to":"a@example.com","To":"evil@example.com"}`, "To"},
		{`{"TO":"evil@example.com"}`, "TO"},
		{`{"to":"a","address":{"zip":"1","ZIP":"2"}}`, "address.ZIP"},
		{`{"to":"a","extra":"x","EXTRA":"y"}`, ""}, // the schema names neither
		{`{"to":"a","address":{"zip":"1"}}`, ""},
	} {
		var payload map[string]any
		if err := json.Unmarshal([]byte(tc.payload), &payload); err != nil {
			t.Fatal(err)
		}
		err := tool.Validate(payload)
		var pe *PayloadError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want it valid", tc.payload, err)
		case tc.field != "" && (!errors.As(err, &pe) || pe.Field != tc.field || !strings.Contains(pe.Reason, "differs only in case")):
			t.Errorf("%s: %v, want a payload error on %s", tc.payload, err, tc.field)
		}
	}
}
