package classify

// Class says what repetition does to a tool, and so what approvals does with a call.
type Class string

const (
	// ExactlyOnce tools (refunds, payments) get a claim-first record keyed by intent.
	ExactlyOnce Class = "exactly-once"
	// AtLeastOnce tools (cache invalidation, log writes) are recorded; repeating them is harmless.
	AtLeastOnce Class = "at-least-once"
	// AtMostOnce tools (customer emails, public posts) wait for a human approval.
	AtMostOnce Class = "at-most-once"
)

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool {
	switch c {
	case ExactlyOnce, AtLeastOnce, AtMostOnce:
		return true
	}
	return false
}

// Reasons given for a class. Tests and `tools check` output rely on them being stable.
const (
	reasonClassSet        = "class set in the tools file"
	reasonReadOnly        = "annotations: readOnlyHint is true, so repeating it is harmless"
	reasonIdempotent      = "annotations: idempotentHint is true, so repeating it is harmless"
	reasonOpenWorldTrue   = "annotations: openWorldHint is true, so the effect reaches the outside world and cannot be taken back: a human approves it"
	reasonOpenWorldAbsent = "annotations: openWorldHint is absent (MCP default: true), so the effect reaches the outside world and cannot be taken back: a human approves it"
	reasonClosedWorld     = "annotations: openWorldHint is false and the tool is neither read-only nor idempotent: a write inside our own systems, claimed first"
	reasonUnregistered    = "not in the tools file: treated as at-most-once (fail closed), so a human approves it and the caller must supply an intent key"
)

// classify derives the class from the MCP annotation hints, using MCP's defaults for absent
// hints (readOnly false, idempotent false, openWorld true).
func classify(a Annotations) (Class, string) {
	switch {
	case isTrue(a.ReadOnlyHint):
		return AtLeastOnce, reasonReadOnly
	case isTrue(a.IdempotentHint):
		return AtLeastOnce, reasonIdempotent
	case a.OpenWorldHint == nil:
		return AtMostOnce, reasonOpenWorldAbsent
	case *a.OpenWorldHint:
		return AtMostOnce, reasonOpenWorldTrue
	default:
		return ExactlyOnce, reasonClosedWorld
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// ChangesRequestedAdvice is what an agent does with an action a person sent
// back (state changes_requested); the REST guidance and the MCP texts say it
// alike.
const ChangesRequestedAdvice = "If changes are requested, revise the payload as the note (decision_note) asks and submit again " +
	"with the same intent key; the next attempt needs a fresh approval."

// The sentence every class that must not be repeated blindly ends with.
const timeoutAdvice = "If a call times out, do not retry: read the action first."

// Guidance is the instruction for a model calling a tool of class c, phrased with the MCP
// tool names. An unknown class gets the at-most-once text: fail closed.
func Guidance(c Class) string {
	switch c {
	case AtLeastOnce:
		return "Recorded; safe to repeat."
	case ExactlyOnce:
		return "A result in_progress that you just created is your claim: perform the effect once, " +
			"then call complete_action or fail_action. After a timeout or error never retry blindly: " +
			"call find_actions with the intent key first. " + timeoutAdvice
	default:
		return "Nothing is sent until a person approves it. Do not call again for the same intent: " +
			"follow the action with get_action (with wait) until it is approved, rejected, changes_requested or expired. " +
			ChangesRequestedAdvice + " " + timeoutAdvice
	}
}
