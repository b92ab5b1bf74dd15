package preview_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

func TestPreviewAndHeadline(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 130)
	for _, tc := range []struct {
		name     string
		preview  map[string]string
		payload  string
		headline string
		fields   []string // name=value in order
	}{
		{"title", map[string]string{"title": "Refund {order}", "to": "{to}", "body": "{body}"},
			`{"order": 42, "to": "c@example.com", "body": "Dear customer,\nyour refund."}`,
			"Refund 42", []string{"to=c@example.com", "body=Dear customer,\nyour refund."}},
		{"title of two lines", map[string]string{"title": "{subject}"}, `{"subject": "First\nSecond"}`, "First …", []string{}},
		{"no title: first field", map[string]string{"to": "{to}", "cc": "{cc}"}, `{"to": "a@x", "cc": "b@x"}`, "cc: b@x", []string{"cc=b@x", "to=a@x"}},
		{"no preview: compact payload", nil, `{"a": 1,  "b": [1, 2]}`, `{"a":1,"b":[1,2]}`, nil},
		{"long title is cut", map[string]string{"title": "{s}"}, `{"s": "` + long + `"}`, strings.Repeat("é", 120) + "…", []string{}},
		{"payload not an object", map[string]string{"title": "x"}, `[1]`, "[1]", nil},
	} {
		a := &queue.Action{Payload: json.RawMessage(tc.payload), Spec: classify.Tool{Preview: tc.preview}}
		if got := preview.Headline(a); got != tc.headline {
			t.Errorf("%s: Headline %q, want %q", tc.name, got, tc.headline)
		}
		var fields []string
		for _, f := range preview.Of(a).Fields {
			fields = append(fields, f.Name+"="+f.Value)
		}
		if strings.Join(fields, "|") != strings.Join(tc.fields, "|") {
			t.Errorf("%s: fields %q, want %q", tc.name, fields, tc.fields)
		}
	}
}
