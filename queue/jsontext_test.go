package queue_test

import (
	"encoding/json"
	"testing"

	"github.com/approvals/approvals/queue"
)

func TestReadableJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"German from Python's ensure_ascii", `{"body":"Gr\u00fc\u00dfe \u2014 Jens"}`, `{"body":"Grüße — Jens"}`},
		{"Japanese", `{"t":"\u3053\u3093\u306b\u3061\u306f"}`, `{"t":"こんにちは"}`},
		{"a surrogate pair", `{"e":"\ud83d\ude00"}`, `{"e":"😀"}`},
		{"upper-case hex", `{"e":"\u00DF"}`, `{"e":"ß"}`},
		{"keys too", `{"Stra\u00dfe":1}`, `{"Straße":1}`},
		{"what must stay escaped", `{"c":"\u0001\n\"\\\u0022\u005c\u2028\u2029\u007f"}`, `{"c":"\u0001\n\"\\\u0022\u005c\u2028\u2029\u007f"}`},
		{"a lone surrogate", `{"s":"\ud83d x \ude00"}`, `{"s":"\ud83d x \ude00"}`},
		{"an escaped backslash before u", `{"p":"C:\\u00fc"}`, `{"p":"C:\\u00fc"}`},
		{"invisible characters are decoded (the page marks them)", `{"s":"a\u202eb\udb40\udc41"}`, "{\"s\":\"a\u202eb\U000E0041\"}"},
		{"cut short", `{"s":"Gr\u00`, `{"s":"Gr\u00`},
		{"no escapes", `{"a":[1,2]}`, `{"a":[1,2]}`},
	} {
		got := queue.ReadableJSON(tc.in)
		if got != tc.want {
			t.Errorf("%s: ReadableJSON(%s) = %s, want %s", tc.name, tc.in, got, tc.want)
			continue
		}
		if !json.Valid([]byte(tc.in)) {
			continue
		}
		var before, after any
		if err := json.Unmarshal([]byte(tc.in), &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(got), &after); err != nil {
			t.Errorf("%s: %s is no longer JSON: %v", tc.name, got, err)
		} else if !queue.JSONEqual([]byte(tc.in), []byte(got)) {
			t.Errorf("%s: %s and %s differ as values", tc.name, tc.in, got)
		}
	}
}

func TestEscapeInvisible(t *testing.T) {
	t.Parallel()
	in := "{\"s\":\"Grüße a\u202eb\U000E0041\u200b\"}"
	got := queue.EscapeInvisible(in)
	want := `{"s":"Grüße a\u202eb\udb40\udc41\u200b"}`
	if got != want {
		t.Fatalf("EscapeInvisible = %s, want %s", got, want)
	}
	if !queue.JSONEqual([]byte(in), []byte(got)) {
		t.Errorf("%s and %s differ as values", in, got)
	}
}
