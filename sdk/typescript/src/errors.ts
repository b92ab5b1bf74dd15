import type { Action, Plan, Problem, ProblemCode } from './openapi.js';

/** A problem as the server sent it; code is a string, as a newer server may send a code this SDK does not know. */
export type ProblemInit = Omit<Partial<Problem>, 'code' | 'status'> & { status: number; code: string };

/**
 * An answer of the approvals API that refused the call: an RFC 9457 problem
 * with its machine `code`. Each code has its own subclass, so an agent can
 * `catch (e) { if (e instanceof IntentKeyReusedError) ... }`.
 */
export class ApprovalsError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  /** The existing action that explains the refusal, when the API sent one. */
  readonly action: Action | undefined;
  /** The problem as the server sent it. */
  readonly problem: ProblemInit;

  /** What an agent should do next, for the refusals an agent meets (empty for the others). */
  readonly guidance: string;

  constructor(problem: ProblemInit, message?: string) {
    const guidance = refusalGuidance[problem.code] ?? '';
    super(
      message ??
        [`approvals: ${problem.code} (${problem.status}): ${problem.detail ?? problem.title ?? ''}`.trim(), guidance].filter(Boolean).join(' '),
    );
    this.guidance = guidance;
    this.name = new.target.name;
    this.status = problem.status;
    this.code = problem.code;
    this.detail = problem.detail ?? '';
    this.action = problem.action;
    this.problem = problem;
  }
}

/**
 * What to do next after each refusal an agent can meet, in the same words in
 * both SDKs (sdk/python/approvals/errors.py) and the server (problem/guidance.go,
 * checked by test/guidance.test.mjs): what happened, and the read to
 * make (find with the intent key, get with wait) instead of a blind retry.
 */
export const refusalGuidance: Readonly<Record<string, string>> = {
  intent_key_reused:
    'This call did nothing new, but its intent is already held by the action returned with this error, whose effect may have happened or be under way: ' +
    'do not call again with other arguments for this intent; read that action (find with its intent key) and tell the user if it is not what was meant.',
  in_progress:
    'The action of this intent is being performed right now: do not perform the effect and do not call again; ' +
    'read the action later (get with wait, or find with its intent key).',
  intent_under_review:
    'An earlier attempt of this intent may have taken effect and an operator is reviewing it (a conflict ticket is open); this call did nothing: ' +
    'do not call again for this intent until the ticket is resolved; read it with find and its intent key.',
  outcome_conflict:
    'The stored outcome stands and an operator ticket is open: do not report again and do not call the tool again for this intent.',
  not_in_plan:
    'This call matches no unused step of the approved plan, so it did nothing: call again only with a step exactly as the plan was approved ' +
    '(the error names the nearest step and the fields that differ), or propose a new plan.',
  step_not_ready:
    'An earlier step of this ordered plan is not done yet, so this call did nothing: perform the earlier steps first, then call this step again.',
  plan_not_approved:
    'The plan this call names is not approved (it is pending, rejected, expired or done), so this call did nothing: do not perform the step another way; read the plan and wait for its decision, or propose a new plan.',
  too_many_checks:
    "This action's verifier was asked moments ago, so this call asked nothing: do not perform the effect; ask again after Retry-After (verify), or read the action (get with wait).",
  no_verifier:
    "This tool has no verifier, so nothing can ask its system of record: do not perform the effect again; read the action (get with wait) and leave an unknown outcome to an operator's ticket.",
};

export class InvalidRequestError extends ApprovalsError {}
export class InvalidPayloadError extends ApprovalsError {}
export class IntentKeyRequiredError extends ApprovalsError {}
export class IntentKeyMismatchError extends ApprovalsError {}
/** The intent is held by an action with another tool or payload: nothing was done. */
export class IntentKeyReusedError extends ApprovalsError {}
/**
 * The intent's action is being performed right now (409 in_progress, or a
 * replayed action still in progress). Never permission to act: read it later.
 */
export class InProgressError extends ApprovalsError {}
/**
 * A conflict ticket is open on the intent's latest attempt (409
 * intent_under_review): its effect may have happened, nothing was claimed.
 * Do not perform the effect; an operator resolves the ticket first.
 */
export class IntentUnderReviewError extends ApprovalsError {}
export class InvalidTransitionError extends ApprovalsError {}
/**
 * A report contradicted the stored outcome; a conflict ticket was opened.
 * Raised by `guard` after the guarded function ran and returned, it carries
 * `performed: true` and the function's `result`: the effect happened, the
 * stored outcome stands, and the tool must not be called again for the intent.
 */
export class OutcomeConflictError extends ApprovalsError {
  /** True when the guarded function ran and returned before the report was refused: the effect happened. */
  readonly performed: boolean;
  /** What the guarded function returned, when performed is true. */
  readonly result: unknown;

  constructor(problem: ProblemInit, message?: string, performed = false, result?: unknown) {
    super(problem, message);
    this.performed = performed;
    this.result = result;
  }

  /** The error of a refused `complete` after the guarded function ran and returned result. */
  static afterPerformed(err: ApprovalsError, result: unknown): OutcomeConflictError {
    const id = err.action?.id ?? 'unknown';
    const stored = err.action?.state ? ` as ${err.action.state}` : '';
    return new OutcomeConflictError(
      err.problem,
      `approvals: the effect happened (the guarded function ran and returned), but action ${id} was already recorded${stored}: ` +
        `${err.detail || 'the report contradicts the stored outcome'}. The stored outcome stands and an operator ticket is open: ` +
        `do not call this tool again for this intent and do not report again; an operator reconciles it.`,
      true,
      result,
    );
  }
}
/** 422 not_in_plan: the call names a plan but matches none of its unused steps; nothing was stored. */
export class NotInPlanError extends ApprovalsError {}
/** 409 step_not_ready: an earlier step of an ordered plan is not done yet. */
export class StepNotReadyError extends ApprovalsError {}
/**
 * 409 plan_not_approved: the plan named is not approved (pending, rejected,
 * expired, done), so it lets no step through. `approvals.plan()` throws it
 * (or a subclass) too when the plan it proposed was not approved: `plan`
 * is the plan as it then was.
 */
export class PlanNotApprovedError extends ApprovalsError {
  /** The plan, when the SDK read it (approvals.plan); the server's 409 names it in detail. */
  readonly plan: Plan | undefined;
  constructor(problem: ProblemInit, message?: string, plan?: Plan) {
    super(problem, message);
    this.plan = plan;
  }

  /** The error for a proposed plan that ended in state (rejected, changes_requested, cancelled, expired). */
  static of(plan: Plan): PlanNotApprovedError {
    const Class =
      plan.state === 'rejected' ? PlanRejectedError : plan.state === 'changes_requested' ? PlanChangesRequestedError : plan.state === 'expired' ? PlanExpiredError : plan.state === 'cancelled' ? PlanCancelledError : PlanNotApprovedError;
    const by = plan.decided_by ? ` by ${plan.decided_by}` : '';
    const note = plan.decision_note ? `: ${plan.decision_note}` : '';
    const detail = `plan ${plan.id} (${JSON.stringify(plan.title)}) is ${plan.state}${by}${note}`;
    const next =
      plan.state === 'changes_requested'
        ? ' Revise the steps as the note asks and propose the plan again.'
        : ' None of its steps may be performed under it: do not perform them another way.';
    return new Class({ status: 409, code: 'plan_not_approved', detail }, `approvals: ${detail}.${next}`, plan);
  }
}
/** A person (or a rule, for a rule-rejected step) rejected the proposed plan; decision_note says why. */
export class PlanRejectedError extends PlanNotApprovedError {}
/** A person asked for changes to the proposed plan: revise its steps as the note asks and propose it again. */
export class PlanChangesRequestedError extends PlanNotApprovedError {}
/** The proposed plan's window ended before it was approved. */
export class PlanExpiredError extends PlanNotApprovedError {}
/** The proposed plan was withdrawn (POST /api/v1/plans/{id}/cancel). */
export class PlanCancelledError extends PlanNotApprovedError {}
/** 409 already_decided: a person or rule decided first (the action is returned with the error). */
export class AlreadyDecidedError extends ApprovalsError {}
export class NotFoundError extends ApprovalsError {}
export class ForbiddenError extends ApprovalsError {}
export class UnauthorizedError extends ApprovalsError {}
export class PayloadTooLargeError extends ApprovalsError {}
export class UnavailableError extends ApprovalsError {}
export class UpstreamUnavailableError extends ApprovalsError {}
export class MethodNotAllowedError extends ApprovalsError {}
export class TooManyWaitersError extends ApprovalsError {}
/** The server is making as many upstream calls as it may; nothing was done (429, Retry-After). */
export class TooManyUpstreamCallsError extends ApprovalsError {}
/** The action's tool has no verifier: nothing can ask its system of record (404). */
export class NoVerifierError extends ApprovalsError {}
/** The action's verifier was asked less than 10 seconds ago (429, Retry-After). */
export class TooManyChecksError extends ApprovalsError {}

/** Refusal codes of the API (docs/api.md) that the OpenAPI document may not list yet; the SDK knows them by name. */
export type RefusalCode = 'not_in_plan' | 'step_not_ready';

// Every code the OpenAPI document lists must have its class: when the
// document gains a code, this object stops compiling.
const classes: Record<ProblemCode | RefusalCode, typeof ApprovalsError> = {
  not_in_plan: NotInPlanError,
  step_not_ready: StepNotReadyError,
  plan_not_approved: PlanNotApprovedError,
  already_decided: AlreadyDecidedError,
  invalid_request: InvalidRequestError,
  invalid_payload: InvalidPayloadError,
  intent_key_required: IntentKeyRequiredError,
  intent_key_mismatch: IntentKeyMismatchError,
  intent_key_reused: IntentKeyReusedError,
  in_progress: InProgressError,
  intent_under_review: IntentUnderReviewError,
  invalid_transition: InvalidTransitionError,
  outcome_conflict: OutcomeConflictError,
  not_found: NotFoundError,
  forbidden: ForbiddenError,
  unauthorized: UnauthorizedError,
  payload_too_large: PayloadTooLargeError,
  unavailable: UnavailableError,
  upstream_unavailable: UpstreamUnavailableError,
  method_not_allowed: MethodNotAllowedError,
  too_many_waiters: TooManyWaitersError,
  too_many_upstream_calls: TooManyUpstreamCallsError,
  no_verifier: NoVerifierError,
  too_many_checks: TooManyChecksError,
};

/** The typed error of a problem answer; an unknown code is a plain ApprovalsError. */
export function problemError(problem: ProblemInit): ApprovalsError {
  const Class = (classes as Record<string, typeof ApprovalsError>)[problem.code] ?? ApprovalsError;
  return new Class(problem);
}

/** The request never got an answer (after the retries that were safe). */
export class ApprovalsConnectionError extends Error {
  override readonly cause: unknown;
  constructor(message: string, cause: unknown) {
    super(message);
    this.name = 'ApprovalsConnectionError';
    this.cause = cause;
  }
}

/**
 * Thrown by the function a guard wraps to say the effect definitely did not
 * happen (the provider refused the call): only then does `guard` report
 * `fail`, which releases the intent for another attempt.
 */
export class NotPerformedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NotPerformedError';
  }
}

/**
 * The effect may have happened: the guarded function threw something other
 * than NotPerformedError (a timeout, a dropped connection), or its outcome
 * could not be recorded. `guard` reports nothing and leaves the action for
 * reconciliation; do not call the tool again for the same intent.
 */
/** What POST /api/v1/actions/{id}/verify answers: the verdict of one check of the tool's verifier. */
export interface VerifyCheck {
  verdict: 'done' | 'not_done' | 'unknown';
  reason: string;
  checked_at: string;
  /** The action as it then is: done with the provider's record when the tool resolves automatically. */
  action: Action;
}

/** What OutcomeUnknownError.verify asks with (an Approvals client). */
export interface Verifying {
  verify(id: string, options?: { once?: boolean; signal?: AbortSignal }): Promise<VerifyCheck>;
}

export class OutcomeUnknownError extends Error {
  readonly action: Action;
  /** True when the function returned and only recording its result failed. */
  readonly performed: boolean;
  /** What the function returned, when performed is true. */
  readonly result: unknown;
  override readonly cause: unknown;
  readonly #client: Verifying | undefined;
  /**
   * The check `guard` asked for after the unknown outcome (its verdict was
   * not a proven, stored `done`), or the refusal it met (no_verifier,
   * too_many_checks, ...); undefined when nothing was asked.
   */
  check: VerifyCheck | Error | undefined;
  constructor(action: Action, cause: unknown, performed = false, result?: unknown, client?: Verifying) {
    const what = performed
      ? `the effect happened but approvals did not record its outcome`
      : `the effect may or may not have happened`;
    super(
      `approvals: ${what} (action ${action.id}, intent ${JSON.stringify(action.intent_key)}); it is left in progress ` +
        `for reconciliation: do not call this tool again for the same intent. Cause: ${describe(cause)}`,
    );
    this.name = 'OutcomeUnknownError';
    this.action = action;
    this.performed = performed;
    this.result = result;
    this.cause = cause;
    this.#client = client;
  }

  /**
   * Asks the tool's system of record whether the effect happened (POST
   * /api/v1/actions/{id}/verify). A `done` verdict on a tool that resolves
   * automatically returns the action done with the stored result; a tool
   * without a verifier throws NoVerifierError.
   */
  verify(options: { once?: boolean; signal?: AbortSignal } = {}): Promise<VerifyCheck> {
    if (!this.#client) return Promise.reject(new Error('approvals: this OutcomeUnknownError has no client to ask with'));
    return this.#client.verify(this.action.id, options);
  }
}

/** A person decided against the action, or it lapsed: the note says why. */
export class NotApprovedError extends Error {
  readonly action: Action;
  readonly state: Action['state'];
  readonly note: string | null;
  constructor(action: Action, message?: string) {
    super(
      message ??
        `approvals: action ${action.id} (intent ${JSON.stringify(action.intent_key)}) is ${action.state}` +
          (action.decision_note ? `: ${action.decision_note}` : ''),
    );
    this.name = new.target.name;
    this.action = action;
    this.state = action.state;
    this.note = action.decision_note;
  }
}

/** Rejected for good: resubmitting replays the rejection. */
export class RejectedError extends NotApprovedError {
  constructor(action: Action) {
    super(action, `approvals: ${action.decided_by ?? 'a person'} rejected action ${action.id}: ${action.decision_note ?? ''}`.trim());
  }
}

/** A person asked for a revision: revise the payload as the note asks and submit again with the same intent key. */
export class ChangesRequestedError extends NotApprovedError {
  constructor(action: Action) {
    super(
      action,
      `approvals: ${action.decided_by ?? 'a person'} asked for changes to action ${action.id}: ${action.decision_note ?? ''}. ` +
        `Revise the payload as the note asks and submit again with the same intent key.`,
    );
  }
}

/** Nobody decided within the wait; the action stays pending, and calling again with the same intent picks up the decision. */
export class StillPendingError extends Error {
  readonly action: Action;
  constructor(action: Action, waitedMs: number) {
    super(
      `approvals: action ${action.id} (intent ${JSON.stringify(action.intent_key)}) is still waiting for a person after ${Math.round(waitedMs / 1000)}s; ` +
        `call again with the same intent later: nothing is sent until it is approved.`,
    );
    this.name = 'StillPendingError';
    this.action = action;
  }
}

/** Nobody decided the proposed plan within the wait; it stays pending: read it later (getPlan) or withdraw it (cancelPlan). */
export class PlanStillPendingError extends Error {
  readonly plan: Plan;
  constructor(plan: Plan, waitedMs: number) {
    super(
      `approvals: plan ${plan.id} (${JSON.stringify(plan.title)}) is still waiting for a person after ${Math.round(waitedMs / 1000)}s; ` +
        `none of its steps may be performed yet: read it later (getPlan with wait) or withdraw it (cancelPlan).`,
    );
    this.name = 'PlanStillPendingError';
    this.plan = plan;
  }
}

/** The server does not offer dry runs (its OpenAPI document has no dry_run parameter), so none was sent. */
export class DryRunUnsupportedError extends Error {
  constructor(url: string) {
    super(`approvals: the server at ${url} does not offer dry runs (POST /api/v1/actions?dry_run=true); nothing was sent`);
    this.name = 'DryRunUnsupportedError';
  }
}

export function describe(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
