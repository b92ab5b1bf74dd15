package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		// RFC 8785 section 3.2.3: names sort by UTF-16 code units, so the
		// emoji (a surrogate pair, D83D) sorts before U+FB33, which UTF-8
		// byte order would put first.
		{"rfc8785 sorting", `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
			"1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
				"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// RFC 8785 section 3.2.2.2's string example.
		{"rfc8785 strings", `"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"`, "\"\u20ac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\""},
		{"short escapes", `"\b\f\n\r\t\u0001\u001f\u007f"`, "\"\\b\\f\\n\\r\\t\\u0001\\u001f\u007f\""},
		{"non-ASCII and line separators stay as they are", `"\u2028k\u00e4se"`, "\"\u2028käse\""},
		{"whitespace goes", " { \"b\" : [ 1 , { } , [ ] ] ,\n\t\"a\" : null } ", `{"a":null,"b":[1,{},[]]}`},
		{"numbers as written", `{"n":1.0,"m":1e3,"big":12345678901234567890.10,"neg":-0,"e":2E-7}`,
			`{"big":12345678901234567890.10,"e":2E-7,"m":1e3,"n":1.0,"neg":-0}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"a name twice keeps both in order", `{"b":1,"a":2,"a":1}`, `{"a":2,"a":1,"b":1}`},
		{"a lone surrogate is U+FFFD", `"\ud800x"`, "\"\uFFFDx\""},
		{"a surrogate pair", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"nested objects sort too", `{"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":2,"y":1}}`},
		{"members already in order stay as written", `{"a":1,"b":{"c":[1,{"d":"x","e":3}]},"c":"\u00e9"}`,
			`{"a":1,"b":{"c":[1,{"d":"x","e":3}]},"c":"é"}`},
		{"escaped names sort by their value", `{"b":1,"\u0061":{"y":"\"","x":2}}`, `{"a":{"x":2,"y":"\""},"b":1}`},
		{"bytes that are not UTF-8, in names and values", "{\"\xff\":\"v\xfe\",\"a\":1}", "{\"a\":1,\"\uFFFD\":\"v\uFFFD\"}"},
		{"more members than the parser keeps at hand", manyMembers(false), manyMembers(true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			again, err := Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s -> %s (%v)", got, again, err)
			}
		})
	}
}

// manyMembers is an object of 40 members, in order or in reverse.
func manyMembers(sorted bool) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range 40 {
		n := 39 - i
		if sorted {
			n = i
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%02d":[%d]`, n, n)
	}
	return b.String() + "}"
}

func TestCanonicalRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":}`, `[1,]`, `01`, `1.`, `-`, `1e`, `{"a" 1}`, `"unterminated`, `{} {}`,
		`tru`, `{"a":1,}`, "\"tab\tinside\"", `"\x"`, `"\u12"`, `[1 2]`} {
		if out, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", in, out)
		}
	}
	// What is not JSON is hashed as its text, so sealing never stops.
	if got := string(appendCanonicalOrString(nil, []byte(`{"a":`))); got != `"{\"a\":"` {
		t.Fatalf("appendCanonicalOrString of broken JSON: %s", got)
	}
}

func TestCanonicalTellsApartWhatJCSWouldNot(t *testing.T) {
	t.Parallel()
	// RFC 8785 rounds numbers to doubles, so these would share a hash.
	a, _ := Canonical([]byte(`{"amount":12345678901234567890}`))
	b, _ := Canonical([]byte(`{"amount":12345678901234567891}`))
	if bytes.Equal(a, b) {
		t.Fatal("two amounts one digit apart have one canonical form")
	}
	c, _ := Canonical([]byte(`{"a":1}`))
	d, _ := Canonical([]byte(`{"a":2,"a":1}`))
	if bytes.Equal(c, d) {
		t.Fatal("a second member of one name disappears from the canonical form")
	}
}

func TestEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 3, 14, 9, 26, 53, 120000000, time.FixedZone("x", 3600))
	ev := Event{ID: 42, ActionID: "01890a5d-ac96-774b-bcce-b302099a8057", Kind: KindSubmitted, Actor: "agent:bot",
		Channel: "api", At: at, Data: json.RawMessage(`{ "b": 1, "a": "x" }`),
		Action: &Submission{Tool: "send_email", Class: "at-most-once", IntentKey: "email:1", Attempt: 2,
			Payload: json.RawMessage(`{"to":"a@example.com","amount":1.50}`), RequestedBy: "agent:bot"}}
	want := `{"action":{"attempt":2,"class":"at-most-once","intent_key":"email:1","payload":{"amount":1.50,"to":"a@example.com"},` +
		`"requested_by":"agent:bot","tool":"send_email"},"action_id":"01890a5d-ac96-774b-bcce-b302099a8057","actor":"agent:bot",` +
		`"at":"2031-03-14T08:26:53.12Z","channel":"api","data":{"a":"x","b":1},"id":42,"kind":"submitted","subject":null}`
	if got := string(EventJSON(ev)); got != want {
		t.Fatalf("EventJSON\n got %s\nwant %s", got, want)
	}
	staff := Event{ID: 7, Subject: "user:ann@example.com", Kind: "login", Actor: "user:ann@example.com", At: at}
	wantStaff := `{"action":null,"action_id":null,"actor":"user:ann@example.com","at":"2031-03-14T08:26:53.12Z","channel":"",` +
		`"data":null,"id":7,"kind":"login","subject":"user:ann@example.com"}`
	if got := string(EventJSON(staff)); got != wantStaff {
		t.Fatalf("EventJSON of a staff event\n got %s\nwant %s", got, wantStaff)
	}
	for _, e := range []Event{ev, staff} {
		b := EventJSON(e)
		if c, err := Canonical(b); err != nil || !bytes.Equal(c, b) {
			t.Fatalf("EventJSON is not canonical JSON: %s -> %s (%v)", b, c, err)
		}
	}
	// Every hashed field counts.
	base := Next(Hash{}, ev)
	for name, change := range map[string]func(e *Event){
		"id": func(e *Event) { e.ID++ }, "action": func(e *Event) { e.ActionID = "x" }, "subject": func(e *Event) { e.Subject = "x" },
		"kind": func(e *Event) { e.Kind = "x" }, "actor": func(e *Event) { e.Actor = "x" }, "channel": func(e *Event) { e.Channel = "x" },
		"at": func(e *Event) { e.At = e.At.Add(time.Microsecond) }, "data": func(e *Event) { e.Data = json.RawMessage(`{"a":"y","b":1}`) },
		"payload": func(e *Event) {
			s := *e.Action
			s.Payload = json.RawMessage(`{"to":"a@example.com","amount":1.5}`)
			e.Action = &s
		},
		"tool":       func(e *Event) { s := *e.Action; s.Tool = "x"; e.Action = &s },
		"attempt":    func(e *Event) { s := *e.Action; s.Attempt = 3; e.Action = &s },
		"intent":     func(e *Event) { s := *e.Action; s.IntentKey = "x"; e.Action = &s },
		"class":      func(e *Event) { s := *e.Action; s.Class = "x"; e.Action = &s },
		"requested":  func(e *Event) { s := *e.Action; s.RequestedBy = "x"; e.Action = &s },
		"submission": func(e *Event) { e.Action = nil },
	} {
		e := ev
		change(&e)
		if Next(Hash{}, e) == base {
			t.Errorf("changing %s leaves the hash as it was", name)
		}
	}
	if Next(Hash{1}, ev) == base {
		t.Error("the previous hash does not count")
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"\u00e9"}`, `[]`, `"x"`, `-1.5e10`, `{"a":1,"a":2}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form is not JSON: %q -> %q", in, out)
		}
	})
}
