package agentapi_test

import (
	"testing"
	"time"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// The filters both agent faces read from text: every refusal is
// invalid_request, and the limits are the documented ones.
func TestParseFilters(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]time.Duration{"": 0, "0s": 0, "30s": 30 * time.Second, "60s": longpoll.MaxWait} {
		if got, err := agentapi.ParseWait(s); err != nil || got != want {
			t.Errorf("wait %q: %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"61s", "-1s", "soon"} {
		if _, err := agentapi.ParseWait(s); queue.ErrorCode(err) != queue.CodeInvalidRequest {
			t.Errorf("wait %q: %v, want invalid_request", s, err)
		}
	}
	if st, err := agentapi.ParseState("pending"); err != nil || st != queue.StatePending {
		t.Errorf("state pending: %s, %v", st, err)
	}
	if _, err := agentapi.ParseState("asleep"); queue.ErrorCode(err) != queue.CodeInvalidRequest {
		t.Errorf("state asleep: %v, want invalid_request", err)
	}
	params := map[string]string{"intent_key": "k", "tool": "t", "cursor": "c"}
	r, err := agentapi.ParseListRequest(func(name string) string { return params[name] })
	if err != nil || r.IntentKey != "k" || r.Tool != "t" || r.Cursor != "c" || r.Limit != agentapi.DefaultListLimit {
		t.Errorf("list: %+v, %v", r, err)
	}
	for _, limit := range []string{"0", "201", "ten"} {
		params["limit"] = limit
		if _, err := agentapi.ParseListRequest(func(name string) string { return params[name] }); queue.ErrorCode(err) != queue.CodeInvalidRequest {
			t.Errorf("limit %q: %v, want invalid_request", limit, err)
		}
	}
}
