package templates

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// indentedLength counts exactly what json.Indent writes.
func TestIndentedLength(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{}`, `[]`, `1`, `"a"`, ` {"a" : [ ] , "b":{}, "c":[1, {"d":"x\\\"y,{"}]} `,
		`[[[[1]]],[],{"":null}]`, `{"a":"\u00e9:,[]{}"}`, `[true,false,null,-1.5e3]`,
	} {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(doc), "", indentText); err != nil {
			t.Fatal(err)
		}
		want := len(strings.TrimRight(b.String(), " ")) // json.Indent keeps trailing spaces
		if got := indentedLength([]byte(strings.TrimRight(doc, " ")), indentText, 1<<20); got != want {
			t.Errorf("indentedLength(%s) = %d, json.Indent wrote %d:\n%s", doc, got, want, b.String())
		}
	}
}

// A document that would indent to more than MaxPrettyJSON is shown
// compact, and the work stops at the limit: 20 KB nested 62 deep, repeated,
// indents to megabytes.
func TestPrettyJSONBounded(t *testing.T) {
	t.Parallel()
	small := `{"to":"a@example.com","n":[1,2]}`
	if s, compact := PrettyJSONBounded([]byte(small)); compact || !strings.Contains(s, "\n  \"to\"") {
		t.Fatalf("small document: %q compact %v, want it indented", s, compact)
	}
	deep := strings.Repeat("[", 62) + "1" + strings.Repeat("]", 62)
	big := `{"a":[` + strings.Repeat(deep+",", 200) + `1]}`
	s, compact := PrettyJSONBounded([]byte(big))
	if !compact || len(s) > len(big) || strings.Contains(s, "\n") {
		t.Fatalf("deep document: %d bytes compact %v, want at most %d bytes on one line", len(s), compact, len(big))
	}
}
