package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CallRead calls a read-only tool of an upstream for a verifier (docs/verifiers.md)
// and returns what it answered: the result's structuredContent,
// else its text content (which the verifier parses as JSON). Any outcome
// but an answer without isError is an error saying why, which makes the
// verdict unknown.
func (m *Manager) CallRead(ctx context.Context, upstream, tool string, args map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	out := m.Call(ctx, upstream, tool, raw)
	if out.Kind != Done {
		return nil, fmt.Errorf("upstream %s tool %s: %s: %s", upstream, tool, out.Kind, out.Error)
	}
	var res struct {
		Structured json.RawMessage `json:"structuredContent"`
		Content    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(out.Result, &res); err != nil {
		return nil, fmt.Errorf("upstream %s tool %s: unreadable result: %w", upstream, tool, err)
	}
	if len(res.Structured) > 0 && string(res.Structured) != "null" {
		return res.Structured, nil
	}
	var b strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	if b.Len() == 0 {
		return nil, errors.New("upstream " + upstream + " tool " + tool + " answered no structured content and no text")
	}
	return json.RawMessage(b.String()), nil
}
