"""approvals: the Python client of the approvals service, which makes AI
agents' side effects safe (exactly-once, at-least-once, at-most-once with a
human approval). Standard library only; Python 3.9+.

    from approvals import Approvals, NotPerformedError

    approvals = Approvals("http://localhost:8080", token)

    @approvals.guard("issue_refund")
    def issue_refund(payload):
        return payments.refund(payload["order_id"], payload["amount"])
"""
from ._openapi import Action, Class, State, Ticket, Tool
from .client import FINAL_STATES, NO_RETRY, Approvals, ApprovedPlan, Duration, RetryPolicy, Submission
from .errors import (ApprovalsConnectionError, ApprovalsError, ChangesRequestedError, DryRunUnsupportedError,
                     ForbiddenError, InProgressError, IntentKeyMismatchError, IntentKeyRequiredError,
                     IntentKeyReusedError, IntentUnderReviewError, InvalidPayloadError, InvalidRequestError, InvalidTransitionError,
                     MethodNotAllowedError, NotApprovedError, NotFoundError, NotInPlanError, NotPerformedError, OutcomeConflictError,
                     OutcomeUnknownError, PayloadTooLargeError, REFUSAL_GUIDANCE, RejectedError, StepNotReadyError, StillPendingError,
                     PlanNotApprovedError, PlanRejectedError, PlanChangesRequestedError, PlanExpiredError,
                     PlanCancelledError, PlanStillPendingError, AlreadyDecidedError, NoVerifierError, TooManyChecksError,
                     TooManyUpstreamCallsError, TooManyWaitersError, UnauthorizedError, UnavailableError,
                     UpstreamUnavailableError)
from .guard import guard

__all__ = [
    "Action", "Approvals", "ApprovalsConnectionError", "ApprovalsError", "ChangesRequestedError", "Class",
    "DryRunUnsupportedError", "Duration", "FINAL_STATES", "ForbiddenError", "InProgressError",
    "IntentKeyMismatchError", "IntentKeyRequiredError", "IntentKeyReusedError", "IntentUnderReviewError", "InvalidPayloadError",
    "InvalidRequestError", "InvalidTransitionError", "MethodNotAllowedError", "NO_RETRY", "NotApprovedError",
    "NotFoundError", "NotInPlanError", "NotPerformedError", "OutcomeConflictError", "OutcomeUnknownError", "PayloadTooLargeError",
    "REFUSAL_GUIDANCE", "RejectedError", "RetryPolicy", "State", "StepNotReadyError", "PlanNotApprovedError", "PlanRejectedError",
    "PlanChangesRequestedError", "PlanExpiredError", "PlanCancelledError", "PlanStillPendingError", "ApprovedPlan",
    "NoVerifierError", "TooManyChecksError", "AlreadyDecidedError", "StillPendingError", "Submission", "Ticket", "TooManyUpstreamCallsError", "TooManyWaitersError",
    "Tool", "UnauthorizedError", "UnavailableError", "UpstreamUnavailableError", "guard",
]
