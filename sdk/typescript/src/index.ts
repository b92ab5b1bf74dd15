export { Approvals, ApprovedPlan, FINAL_STATES } from './client.js';
export type {
  ApprovalsOptions,
  CallOptions,
  SubmitOptions,
  GetOptions,
  FindOptions,
  Submission,
  DryRunResult,
  VerifyOptions,
  PlanStepInput,
  PlanOptions,
  GetPlanOptions,
  TraceContext,
} from './client.js';
export { guard, defaultWaitFor } from './guard.js';
export type { GuardOptions, GuardedFunction, GuardCallOptions } from './guard.js';
export { guardTools } from './ai.js';
export type { GuardToolsOptions, ExecutableToolLike } from './ai.js';
export { guardedToolGuidance } from './guidance.js';
export * from './errors.js';
export type { Duration } from './duration.js';
export type { RetryPolicy } from './retry.js';
export { defaultRetryPolicy } from './retry.js';
export type * from './openapi.js';
export { StateValues, ClassValues, ProblemCodes } from './openapi.js';
