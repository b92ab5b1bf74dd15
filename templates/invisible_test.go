package templates

import (
	"bytes"
	"context"
	"testing"
)

func TestMarked(t *testing.T) {
	t.Parallel()
	const mark = `<mark class="invisible" data-testid="invisible" title="invisible character">`
	tests := []struct{ name, in, want string }{
		{"plain", "hello", "hello"},
		{"markup stays text", `<b>"x"</b> & y`, `&lt;b&gt;&#34;x&#34;&lt;/b&gt; &amp; y`},
		{"override", "pay \u202egnp.exe", "pay " + mark + "[U+202E]</mark>gnp.exe"},
		{"zero-width at both ends", "\u200badmin\ufeff", mark + "[U+200B]</mark>admin" + mark + "[U+FEFF]</mark>"},
		{"markup around a mark", "<i>\u2066</i>", "&lt;i&gt;" + mark + "[U+2066]</mark>&lt;/i&gt;"},
		{"arabic letter mark", "a\u061cb", "a" + mark + "[U+061C]</mark>b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := Marked(tt.in).Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Fatalf("Marked(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}
