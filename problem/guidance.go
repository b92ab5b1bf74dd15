package problem

import (
	"strings"

	"github.com/approvals/approvals/queue"
)

// Face is where an agent reads a refusal: the REST API, the MCP endpoint
// or an SDK. The guidance names the reads that face has.
type Face struct {
	// Find reads an intent's actions by its intent key.
	Find string
	// Get reads one action, and with wait long-polls it.
	Get string
	// Verify asks an action's verifier.
	Verify string
}

var (
	FaceREST = Face{Find: "GET /api/v1/actions", Get: "GET /api/v1/actions/{id}", Verify: "POST /api/v1/actions/{id}/verify"}
	FaceMCP  = Face{Find: "find_actions", Get: "get_action", Verify: "verify_action"}
	// FaceSDK is the SDKs' (sdk/typescript/src/errors.ts refusalGuidance,
	// sdk/python/approvals/errors.py REFUSAL_GUIDANCE), which tests compare
	// with sdk/testdata/refusal-guidance.json, written from this table.
	FaceSDK = Face{Find: "find", Get: "get", Verify: "verify"}
)

// refusalGuidance is what to do next after each refusal an agent can meet:
// what happened, and the read to make instead of a blind retry. The one
// source of these words: the REST problem's guidance member, the MCP
// refusal's text and the SDKs' errors all say them. {find} and {get} are
// the face's reads. not_in_plan and step_not_ready are the plans' codes,
// which the SDKs know by name.
var refusalGuidance = map[queue.Code]string{
	queue.CodeIntentKeyReused: "This call did nothing new, but its intent is already held by the action returned with this error, whose effect may have happened or be under way: " +
		"do not call again with other arguments for this intent; read that action ({find} with its intent key) and tell the user if it is not what was meant.",
	queue.CodeInProgress: "The action of this intent is being performed right now: do not perform the effect and do not call again; " +
		"read the action later ({get} with wait, or {find} with its intent key).",
	queue.CodeIntentUnderReview: "An earlier attempt of this intent may have taken effect and an operator is reviewing it (a conflict ticket is open); this call did nothing: " +
		"do not call again for this intent until the ticket is resolved; read it with {find} and its intent key.",
	queue.CodeOutcomeConflict: "The stored outcome stands and an operator ticket is open: do not report again and do not call the tool again for this intent.",
	queue.CodePlanNotApproved: "The plan this call names is not approved (it is pending, rejected, expired or done), so this call did nothing: do not perform the step another way; read the plan and wait for its decision, or propose a new plan.",
	queue.CodeTooManyChecks:   "This action's verifier was asked moments ago, so this call asked nothing: do not perform the effect; ask again after Retry-After ({verify}), or read the action ({get} with wait).",
	queue.CodeNoVerifier:      "This tool has no verifier, so nothing can ask its system of record: do not perform the effect again; read the action ({get} with wait) and leave an unknown outcome to an operator's ticket.",
	queue.CodeNotInPlan: "This call matches no unused step of the approved plan, so it did nothing: call again only with a step exactly as the plan was approved " +
		"(the error names the nearest step and the fields that differ), or propose a new plan.",
	queue.CodeStepNotReady: "An earlier step of this ordered plan is not done yet, so this call did nothing: perform the earlier steps first, then call this step again.",
}

// Guidance is what an agent on face should do after a refusal with code c;
// empty for the codes that are not refusals an agent meets.
func Guidance(c queue.Code, f Face) string {
	g, ok := refusalGuidance[c]
	if !ok {
		return ""
	}
	return strings.NewReplacer("{find}", f.Find, "{get}", f.Get, "{verify}", f.Verify).Replace(g)
}

// GuidanceCodes are the codes that carry guidance.
func GuidanceCodes() []queue.Code {
	out := make([]queue.Code, 0, len(refusalGuidance))
	for c := range refusalGuidance {
		out = append(out, c)
	}
	return out
}
