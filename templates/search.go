package templates

import (
	"net/url"
	"time"

	"github.com/approvals/approvals/queue"
)

// SearchView is the action search.
type SearchView struct {
	Now       time.Time
	State     string
	Tool      string
	IntentKey string // a prefix
	Tools     []string
	Actions   []*queue.Action
	Next      string
	Error     string
}

// NextURL is the next page of results.
func (v SearchView) NextURL() string {
	q := url.Values{}
	for k, val := range map[string]string{"state": v.State, "tool": v.Tool, "intent_key": v.IntentKey, "cursor": v.Next} {
		if val != "" {
			q.Set(k, val)
		}
	}
	return "/actions?" + q.Encode()
}

func stateOptions() []string {
	out := make([]string, 0, len(queue.States))
	for _, s := range queue.States {
		out = append(out, string(s))
	}
	return out
}
