package mcpserver_test

import (
	"testing"

	"github.com/approvals/approvals/queue"
)

// verify_action refuses a tool without a verifier (no_verifier) and another
// agent's action (not_found), with the code in the refusal; the verdicts
// themselves are the Service's, tested in verifier/.
func TestVerifyActionRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "owner"))
	a := wantAction(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-verify", "line_id": "l-1", "amount": 3}), queue.StateInProgress)
	wantRefusal(t, call(t, cs, "verify_action", map[string]any{"id": a.ID}), queue.CodeNoVerifier)
	other := e.connect(t, e.token(t, "other"))
	wantRefusal(t, call(t, other, "verify_action", map[string]any{"id": a.ID}), queue.CodeNotFound)
	wantRefusal(t, call(t, cs, "verify_action", map[string]any{"id": a.ID, "extra": 1}), queue.CodeInvalidRequest)
}
