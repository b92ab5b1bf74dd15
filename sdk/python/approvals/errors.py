"""The errors of the approvals SDK: one class per problem ``code`` of the API,
and the guard's own (NotPerformedError, OutcomeUnknownError, ...)."""
from typing import Any, Dict, Optional, Type

from ._openapi import PROBLEM_CODES, Action


#: What to do next after each refusal an agent can meet, in the same words in
#: both SDKs (sdk/typescript/src/errors.ts) and the server (problem/guidance.go,
#: checked by tests/test_guidance.py): what happened, and the read to make
#: (find with the intent key, get with wait) instead of a blind retry.
REFUSAL_GUIDANCE: Dict[str, str] = {
    "intent_key_reused":
        "This call did nothing new, but its intent is already held by the action returned with this error, whose "
        "effect may have happened or be under way: do not call again with other arguments for this intent; read that "
        "action (find with its intent key) and tell the user if it is not what was meant.",
    "in_progress":
        "The action of this intent is being performed right now: do not perform the effect and do not call again; "
        "read the action later (get with wait, or find with its intent key).",
    "intent_under_review":
        "An earlier attempt of this intent may have taken effect and an operator is reviewing it (a conflict ticket "
        "is open); this call did nothing: do not call again for this intent until the ticket is resolved; read it "
        "with find and its intent key.",
    "outcome_conflict":
        "The stored outcome stands and an operator ticket is open: do not report again and do not call the tool "
        "again for this intent.",
    "not_in_plan":
        "This call matches no unused step of the approved plan, so it did nothing: call again only with a step "
        "exactly as the plan was approved (the error names the nearest step and the fields that differ), or propose "
        "a new plan.",
    "step_not_ready":
        "An earlier step of this ordered plan is not done yet, so this call did nothing: perform the earlier steps "
        "first, then call this step again.",
    "plan_not_approved":
        "The plan this call names is not approved (it is pending, rejected, expired or done), so this call did nothing: do not perform the step another way; read the plan and wait for its decision, or propose a new plan.",
    "too_many_checks":
        "This action's verifier was asked moments ago, so this call asked nothing: do not perform the effect; ask again after Retry-After (verify), or read the action (get with wait).",
    "no_verifier":
        "This tool has no verifier, so nothing can ask its system of record: do not perform the effect again; read the action (get with wait) and leave an unknown outcome to an operator's ticket.",
}


class ApprovalsError(Exception):
    """The API refused the call: an RFC 9457 problem with its machine ``code``."""

    def __init__(self, problem: Dict[str, Any], message: Optional[str] = None) -> None:
        self.problem = problem
        self.status: int = int(problem.get("status") or 0)
        self.code: str = str(problem.get("code") or "")
        self.detail: str = str(problem.get("detail") or problem.get("title") or "")
        #: The existing action that explains the refusal, when the API sent one.
        self.action: Optional[Action] = problem.get("action")
        #: What an agent should do next, for the refusals an agent meets ("" for the others).
        self.guidance: str = REFUSAL_GUIDANCE.get(self.code, "")
        default = ("approvals: %s (%d): %s" % (self.code, self.status, self.detail)).strip()
        super().__init__(message or " ".join(part for part in (default, self.guidance) if part))


class InvalidRequestError(ApprovalsError):
    pass


class InvalidPayloadError(ApprovalsError):
    pass


class IntentKeyRequiredError(ApprovalsError):
    pass


class IntentKeyMismatchError(ApprovalsError):
    pass


class IntentKeyReusedError(ApprovalsError):
    """The intent is held by an action with another tool or payload: nothing was done."""


class InProgressError(ApprovalsError):
    """The intent's action is being performed right now: never permission to act; read it later."""


class IntentUnderReviewError(ApprovalsError):
    """A conflict ticket is open on the intent's latest attempt (409
    intent_under_review): its effect may have happened, nothing was claimed.
    Do not perform the effect; an operator resolves the ticket first."""


class InvalidTransitionError(ApprovalsError):
    pass


class OutcomeConflictError(ApprovalsError):
    """A report contradicted the stored outcome; a conflict ticket was opened.
    Raised by the guard after the guarded function ran and returned, it
    carries ``performed = True`` and the function's ``result``: the effect
    happened, the stored outcome stands, and the tool must not be called again
    for the intent."""

    def __init__(self, problem: Dict[str, Any], message: Optional[str] = None, performed: bool = False,
                 result: Any = None) -> None:
        super().__init__(problem, message)
        #: True when the guarded function ran and returned before the report was refused.
        self.performed = performed
        #: What the guarded function returned, when performed is true.
        self.result = result

    @classmethod
    def after_performed(cls, err: "OutcomeConflictError", result: Any) -> "OutcomeConflictError":
        """The error of a refused ``complete`` after the guarded function ran and returned result."""
        action = err.action or {}
        stored = " as %s" % action["state"] if action.get("state") else ""
        return cls(err.problem, "approvals: the effect happened (the guarded function ran and returned), but action %s "
                                "was already recorded%s: %s. The stored outcome stands and an operator ticket is open: "
                                "do not call this tool again for this intent and do not report again; an operator "
                                "reconciles it." % (action.get("id", "unknown"), stored,
                                                    err.detail or "the report contradicts the stored outcome"),
                   performed=True, result=result)


class NotInPlanError(ApprovalsError):
    """422 not_in_plan: the call names a plan but matches none of its unused steps; nothing was stored."""


class StepNotReadyError(ApprovalsError):
    """409 step_not_ready: an earlier step of an ordered plan is not done yet."""


class PlanNotApprovedError(ApprovalsError):
    """409 plan_not_approved: the plan named is not approved (pending, rejected, expired, done), so it lets no step through.
    ``Approvals.plan`` raises it (or a subclass) too when the plan it proposed was not approved: ``plan`` is the plan
    as it then was."""

    def __init__(self, problem: Dict[str, Any], message: Optional[str] = None, plan: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(problem, message)
        #: The plan, when the SDK read it (Approvals.plan).
        self.plan = plan

    @staticmethod
    def of(plan: Dict[str, Any]) -> "PlanNotApprovedError":
        """The error for a proposed plan that ended in its state (rejected, changes_requested, cancelled, expired)."""
        cls = {"rejected": PlanRejectedError, "changes_requested": PlanChangesRequestedError,
               "expired": PlanExpiredError, "cancelled": PlanCancelledError}.get(plan["state"], PlanNotApprovedError)
        detail = "plan %s (%r) is %s%s%s" % (plan["id"], plan.get("title"), plan["state"],
                                             " by " + plan["decided_by"] if plan.get("decided_by") else "",
                                             ": " + plan["decision_note"] if plan.get("decision_note") else "")
        nxt = (" Revise the steps as the note asks and propose the plan again." if plan["state"] == "changes_requested"
               else " None of its steps may be performed under it: do not perform them another way.")
        return cls({"status": 409, "code": "plan_not_approved", "detail": detail}, "approvals: %s.%s" % (detail, nxt), plan)


class PlanRejectedError(PlanNotApprovedError):
    """A person (or a rule, for a rule-rejected step) rejected the proposed plan; ``plan["decision_note"]`` says why."""


class PlanChangesRequestedError(PlanNotApprovedError):
    """A person asked for changes to the proposed plan: revise its steps as the note asks and propose it again."""


class PlanExpiredError(PlanNotApprovedError):
    """The proposed plan's window ended before it was approved."""


class PlanCancelledError(PlanNotApprovedError):
    """The proposed plan was withdrawn (cancel_plan)."""


class AlreadyDecidedError(ApprovalsError):
    """409 already_decided: a person or rule decided first (the action is returned with the error)."""


class NotFoundError(ApprovalsError):
    pass


class ForbiddenError(ApprovalsError):
    pass


class UnauthorizedError(ApprovalsError):
    pass


class PayloadTooLargeError(ApprovalsError):
    pass


class UnavailableError(ApprovalsError):
    pass


class UpstreamUnavailableError(ApprovalsError):
    pass


class MethodNotAllowedError(ApprovalsError):
    pass


class TooManyWaitersError(ApprovalsError):
    pass


class TooManyUpstreamCallsError(ApprovalsError):
    """The server is making as many upstream calls as it may; nothing was done."""


class NoVerifierError(ApprovalsError):
    """The action's tool has no verifier: nothing can ask its system of record."""


class TooManyChecksError(ApprovalsError):
    """The action's verifier was asked less than 10 seconds ago; ask again after Retry-After."""


ERROR_CLASSES: Dict[str, Type[ApprovalsError]] = {
    "invalid_request": InvalidRequestError,
    "invalid_payload": InvalidPayloadError,
    "intent_key_required": IntentKeyRequiredError,
    "intent_key_mismatch": IntentKeyMismatchError,
    "intent_key_reused": IntentKeyReusedError,
    "in_progress": InProgressError,
    "intent_under_review": IntentUnderReviewError,
    "invalid_transition": InvalidTransitionError,
    "outcome_conflict": OutcomeConflictError,
    # Refusal codes of the API (docs/api.md) the OpenAPI document may not list yet: known by name.
    "not_in_plan": NotInPlanError,
    "step_not_ready": StepNotReadyError,
    "plan_not_approved": PlanNotApprovedError,
    "already_decided": AlreadyDecidedError,
    "not_found": NotFoundError,
    "forbidden": ForbiddenError,
    "unauthorized": UnauthorizedError,
    "payload_too_large": PayloadTooLargeError,
    "unavailable": UnavailableError,
    "upstream_unavailable": UpstreamUnavailableError,
    "method_not_allowed": MethodNotAllowedError,
    "too_many_waiters": TooManyWaitersError,
    "too_many_upstream_calls": TooManyUpstreamCallsError,
    "no_verifier": NoVerifierError,
    "too_many_checks": TooManyChecksError,
}

# Every code the OpenAPI document lists has its class (a drift fails at import).
_missing = set(PROBLEM_CODES) - set(ERROR_CLASSES)
if _missing:  # pragma: no cover
    raise ImportError("approvals: no error class for problem codes %s" % sorted(_missing))


def problem_error(problem: Dict[str, Any]) -> ApprovalsError:
    """The typed error of a problem answer; an unknown code is a plain ApprovalsError."""
    return ERROR_CLASSES.get(str(problem.get("code")), ApprovalsError)(problem)


class ApprovalsConnectionError(Exception):
    """The request never got an answer (after the retries that were safe)."""


class NotPerformedError(Exception):
    """Raised by a guarded function to say the effect definitely did not happen
    (the provider refused the call): only then does the guard report ``fail``,
    which releases the intent for another attempt."""


class OutcomeUnknownError(Exception):
    """The effect may have happened: the guarded function raised something other
    than NotPerformedError, or its outcome could not be recorded. The guard
    reports nothing and leaves the action for reconciliation: do not call the
    tool again for the same intent."""

    def __init__(self, action: Action, cause: BaseException, performed: bool = False, result: Any = None,
                 client: Any = None) -> None:
        self.action = action
        self.cause = cause
        self._client = client
        #: The check the guard asked for after the unknown outcome (its verdict was not a proven, stored done),
        #: or the refusal it met (NoVerifierError, TooManyChecksError, ...); None when nothing was asked.
        self.check: Any = None
        #: True when the function returned and only recording its result failed.
        self.performed = performed
        self.result = result
        what = ("the effect happened but approvals did not record its outcome" if performed
                else "the effect may or may not have happened")
        super().__init__(
            "approvals: %s (action %s, intent %r); it is left in progress for reconciliation: "
            "do not call this tool again for the same intent. Cause: %s" % (what, action["id"], action["intent_key"], cause))

    def verify(self, *, once: bool = False) -> Dict[str, Any]:
        """Asks the tool's system of record whether the effect happened
        (POST /api/v1/actions/{id}/verify): ``{"verdict", "reason",
        "checked_at", "action"}``. With a ``done`` verdict on a tool that
        resolves automatically, ``action["result"]`` is the stored result.
        Raises NoVerifierError for a tool without a verifier."""
        if self._client is None:
            raise RuntimeError("approvals: this OutcomeUnknownError has no client to ask with")
        return self._client.verify(self.action["id"], once=once)


class NotApprovedError(Exception):
    """A person decided against the action, or it lapsed: ``note`` says why."""

    def __init__(self, action: Action, message: Optional[str] = None) -> None:
        self.action = action
        self.state = action["state"]
        self.note = action.get("decision_note")
        super().__init__(message or "approvals: action %s (intent %r) is %s%s" % (
            action["id"], action["intent_key"], action["state"], ": " + self.note if self.note else ""))


class RejectedError(NotApprovedError):
    """Rejected for good: resubmitting replays the rejection."""

    def __init__(self, action: Action) -> None:
        super().__init__(action, "approvals: %s rejected action %s: %s" % (
            action.get("decided_by") or "a person", action["id"], action.get("decision_note") or ""))


class ChangesRequestedError(NotApprovedError):
    """A person asked for a revision: revise the payload as the note asks and
    submit again with the same intent key."""

    def __init__(self, action: Action) -> None:
        super().__init__(action, "approvals: %s asked for changes to action %s: %s. Revise the payload as the note "
                                 "asks and submit again with the same intent key." % (
                                     action.get("decided_by") or "a person", action["id"], action.get("decision_note") or ""))


class StillPendingError(Exception):
    """Nobody decided within the wait; the action stays pending, and calling
    again with the same intent picks up the decision."""

    def __init__(self, action: Action, waited: float) -> None:
        self.action = action
        super().__init__("approvals: action %s (intent %r) is still waiting for a person after %ds; call again with "
                         "the same intent later: nothing is sent until it is approved." % (
                             action["id"], action["intent_key"], round(waited)))


class PlanStillPendingError(Exception):
    """Nobody decided the proposed plan within the wait; it stays pending: read it later (get_plan) or withdraw it
    (cancel_plan)."""

    def __init__(self, plan: Dict[str, Any], waited: float) -> None:
        self.plan = plan
        super().__init__("approvals: plan %s (%r) is still waiting for a person after %ds; none of its steps may be "
                         "performed yet: read it later (get_plan with wait) or withdraw it (cancel_plan)." % (
                             plan["id"], plan.get("title"), round(waited)))


class DryRunUnsupportedError(Exception):
    """The server's OpenAPI document offers no dry_run, so none was sent."""
