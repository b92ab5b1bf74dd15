// The OpenAI Agents SDK adapter (@openai/agents): guardedTool is the SDK's
// tool() with execute guarded by approvals; with needsApproval: 'dry-run'
// the Agents SDK's own approval step is answered by a dry run (does this
// call need a person?), and resolveApprovals answers the run's
// interruptions from approvals' decisions.
import { tool } from '@openai/agents';
import type { Approvals } from './client.js';
import type { Duration } from './duration.js';
import { withGuidance } from './guidance.js';

const guardedKey = Symbol.for('@approvals/sdk/openai-agents');

interface GuardedInfo {
  approvals: Approvals;
  tool: string;
  intentKey?: string | ((input: any) => string);
}

export interface GuardedToolOptions<P extends Record<string, unknown>> {
  name: string;
  description: string;
  /** A zod object schema or a JSON Schema, as for tool(). */
  parameters: any;
  strict?: boolean;
  execute: (input: P, context?: any, details?: any) => unknown;
  /** The tool's name in approvals' tools file (default: name). */
  approvalsTool?: string;
  /** The intent key, or how to compute it; omit it where the tools file's template derives it. */
  intentKey?: string | ((input: P) => string);
  /** How long an at-most-once call waits inside execute for a person (default 10 minutes). */
  waitFor?: Duration;
  /**
   * 'dry-run': ask approvals (a dry run, nothing written) whether the call
   * needs a person; if so the run is interrupted and resolveApprovals
   * answers it. Default false: execute waits for the decision itself.
   */
  needsApproval?: 'dry-run' | false;
  /** Append the guard's guidance to the description (default true). */
  describe?: boolean;
  /** What the model reads when the call fails; default the guard's error message, which is written for models. */
  errorFunction?: (context: any, error: unknown) => string | Promise<string>;
  /**
   * The framework's own per-call timeout (tool()'s timeoutMs). On a timeout
   * the model reads timeoutErrorFunction's answer (default: guardedTimeoutMessage),
   * while the guarded call goes on: its effect may still happen, once, and
   * its outcome is reported to approvals as usual.
   */
  timeoutMs?: number;
  /** What the model reads on a timeout; default guardedTimeoutMessage. */
  timeoutErrorFunction?: (context: any, error: unknown) => string | Promise<string>;
  /** tool()'s timeoutBehavior (default error_as_result: the model reads the timeout message). */
  timeoutBehavior?: 'error_as_result' | 'raise_exception';
}

/** What a model reads when the framework's timeoutMs ends a guarded call. */
export function guardedTimeoutMessage(tool: string, timeoutMs: number): string {
  return (
    `The tool ${tool} did not answer within ${timeoutMs} ms, but the call goes on and may still take effect (at most once for this intent). ` +
    `Do not call it again with other arguments. Calling it again with the same arguments is safe: it returns the result once the call is done, ` +
    `or says it is still in progress.`
  );
}

/** tool() of the Agents SDK, with execute guarded by approvals. */
export function guardedTool<P extends Record<string, unknown>>(approvals: Approvals, options: GuardedToolOptions<P>) {
  const { approvalsTool, intentKey, waitFor, needsApproval, describe, execute, errorFunction, timeoutMs, timeoutErrorFunction, timeoutBehavior, ...rest } =
    options;
  const name = approvalsTool ?? options.name;
  const t = tool({
    ...rest,
    strict: rest.strict ?? true,
    description: describe === false ? rest.description : withGuidance(rest.description),
    // The SDK's default shows the model a generic message; the guard's
    // errors say what happened and that the call must not be rephrased.
    errorFunction: errorFunction ?? ((_context: unknown, error: unknown) => (error instanceof Error ? error.message : String(error))),
    ...(timeoutMs === undefined
      ? {}
      : {
          timeoutMs,
          timeoutBehavior: timeoutBehavior ?? 'error_as_result',
          timeoutErrorFunction: timeoutErrorFunction ?? (() => guardedTimeoutMessage(options.name, timeoutMs)),
        }),
    execute: (input: P, context?: any, details?: any) =>
      approvals.guard(name, (payload: P) => execute(payload, context, details), { waitFor, intentKey })(input),
    needsApproval:
      needsApproval === 'dry-run'
        ? async (_context: unknown, input: P) => needsApprovalFromDryRun(approvals, name, input, typeof intentKey === 'function' ? intentKey(input) : intentKey)
        : false,
  } as any);
  (t as any)[guardedKey] = { approvals, tool: name, intentKey } satisfies GuardedInfo;
  return t;
}

/**
 * Whether a call needs a person, from a dry run: a new submission that
 * policies leave to a person, or a replay of one still pending. Everything
 * else runs at once, and the guard answers it (a claim, a record, a stored
 * result, or a refusal the model reads).
 */
export async function needsApprovalFromDryRun(approvals: Approvals, tool: string, input: Record<string, unknown>, intentKey?: string): Promise<boolean> {
  const r = await approvals.dryRun(tool, input, { intentKey });
  if (r.outcome === 'human') return true;
  return r.outcome === 'replay' && r.action?.state === 'pending';
}

export interface ResolveOptions {
  /** How long to wait for each decision (default 10 minutes). */
  waitFor?: Duration;
  signal?: AbortSignal;
}

export interface Resolution {
  approved: number;
  rejected: number;
  /** Still waiting for a person: resolve again later. */
  pending: number;
}

/**
 * Answers a run's interruptions for guarded tools from approvals: submits
 * each call (a pending action a person sees on the dashboard), waits for the
 * decision and approves or rejects the interruption with it. Run the agent
 * again with result.state afterwards; the guarded execute then runs the
 * approved call once.
 */
export async function resolveApprovals(
  result: { interruptions: any[]; state: { approve(item: any): void; reject(item: any, options?: { message?: string }): void } },
  options: ResolveOptions = {},
): Promise<Resolution> {
  const out: Resolution = { approved: 0, rejected: 0, pending: 0 };
  for (const item of result.interruptions) {
    const t = (item.agent?.tools ?? []).find((x: any) => x?.name === item.name && x?.[guardedKey]);
    const info: GuardedInfo | undefined = t?.[guardedKey];
    if (!info) continue;
    const input = JSON.parse(item.arguments ?? '{}');
    const intentKey = typeof info.intentKey === 'function' ? info.intentKey(input) : info.intentKey;
    let { action } = await info.approvals.submit(info.tool, input, { intentKey, signal: options.signal });
    if (action.state === 'pending') {
      action = await info.approvals.get(action.id, { wait: options.waitFor ?? '10m', state: 'pending', signal: options.signal });
    }
    if (action.state === 'pending') {
      out.pending++;
    } else if (action.state === 'approved' || action.state === 'done' || action.state === 'in_progress') {
      result.state.approve(item);
      out.approved++;
    } else {
      const note = action.decision_note ? `: ${action.decision_note}` : '';
      result.state.reject(item, { message: `approvals: ${action.state} by ${action.decided_by ?? 'approvals'}${note}` });
      out.rejected++;
    }
  }
  return out;
}
