package classify

import (
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
