package classify

import (
	"maps"
	"slices"
	"strings"
)

// PreviewHides lists the payload fields that the tool's preview templates
// do not show: the dotted paths of the largest parts of payload that no
// placeholder names, itself or through an enclosing object ("customer_id",
// "address.zip"), sorted. A placeholder shows what it names whole (a
// string verbatim, anything else as compact JSON), so a field is shown when
// a placeholder names it or an object around it. Without preview templates
// every top-level field is hidden. A one-click decision outside the
// dashboard (a Slack button) is offered only when nothing is hidden.
func (t *Tool) PreviewHides(payload map[string]any) []string {
	shown := map[string]bool{}   // dotted paths that placeholders name
	partial := map[string]bool{} // dotted paths with a named path below them
	for _, text := range t.Preview {
		tm, err := parseTemplate(text)
		if err != nil {
			continue
		}
		for _, p := range tm {
			if p.path == nil {
				continue
			}
			shown[p.field] = true
			for i := 1; i < len(p.path); i++ {
				partial[strings.Join(p.path[:i], ".")] = true
			}
		}
	}
	var out []string
	var walk func(obj map[string]any, prefix string)
	walk = func(obj map[string]any, prefix string) {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			path := prefix + k
			if shown[path] {
				continue
			}
			if sub, ok := obj[k].(map[string]any); ok && partial[path] {
				walk(sub, path+".")
				continue
			}
			out = append(out, path)
		}
	}
	walk(payload, "")
	return out
}
