package slack_test

import (
	"context"
	"strings"
	"sync"

	"github.com/approvals/approvals/queue"
)

const botToken = "xoxb-1-test-token"

// buttons lists the action_id=value of every button in blocks.
func buttons(blocks []map[string]any) []string {
	var out []string
	for _, b := range blocks {
		if b["type"] != "actions" {
			continue
		}
		els, _ := b["elements"].([]any)
		for _, e := range els {
			m, _ := e.(map[string]any)
			out = append(out, m["action_id"].(string)+"="+m["value"].(string))
		}
	}
	return out
}

// blockText is every text of blocks joined, to search in.
func blockText(blocks []map[string]any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "text" {
					b.WriteString(s + "\n")
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, blk := range blocks {
		walk(blk)
	}
	return b.String()
}

// messageLog keeps the posted messages as the stores do, in memory: the stores' own
// behaviour is tested by their conformance suite, not here. now, when set, is the action as
// ActionGetByID reads it (decided while a message was on its way).
type messageLog struct {
	mu   sync.Mutex
	list []queue.ChannelMessage
	now  *queue.Action
}

func (l *messageLog) ChannelMessageAdd(_ context.Context, m queue.ChannelMessage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, m)
	return nil
}

func (l *messageLog) ChannelMessageList(_ context.Context, actionID string) ([]queue.ChannelMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []queue.ChannelMessage
	for _, m := range l.list {
		if m.ActionID == actionID {
			out = append(out, m)
		}
	}
	return out, nil
}

func (l *messageLog) ActionGetByID(_ context.Context, id string) (*queue.Action, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.now == nil {
		return nil, queue.ActionNotFound(id)
	}
	return l.now, nil
}

func (l *messageLog) all() []queue.ChannelMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]queue.ChannelMessage(nil), l.list...)
}
