// The Vercel AI SDK adapter (`ai` 7.x): guardTools wraps the execute of
// each tool of a tool set in approvals' guard. It needs nothing from `ai` at
// run time, so the package root exports it too.
import type { Approvals, ApprovedPlan } from './client.js';
import type { Duration } from './duration.js';
import { withGuidance } from './guidance.js';

/** The part of an AI SDK tool the adapter touches (description may be a function of the tool context in ai 7). */
export interface ExecutableToolLike {
  description?: unknown;
  execute?: (input: any, options: any) => unknown;
}

export interface GuardToolsOptions {
  /** Which tools to guard (default: every tool that has an execute). */
  only?: string[];
  /** The approvals tool name of each AI SDK tool (default: the same name). */
  names?: Record<string, string>;
  /** The intent key per tool, or how to compute it from the input; omit it where the tools file's template derives it. */
  intentKeys?: Record<string, string | ((input: any) => string)>;
  /** How long an at-most-once call waits for a person (default 10 minutes). */
  waitFor?: Duration;
  /** Append the guard's guidance to each description, so the model knows not to rephrase a failed call (default true). */
  describe?: boolean;
  /**
   * The approved plan the calls are steps of (approvals.plan), or a function
   * answering it at each call (undefined: no plan yet): each guarded call then
   * carries its id, and one that differs from every unused step is refused
   * with not_in_plan.
   */
  plan?: ApprovedPlan | string | (() => ApprovedPlan | string | undefined);
}

/**
 * Returns the tool set with each listed tool's execute guarded: a claim runs
 * it once and completes; a replay returns the stored result; an
 * at-most-once call waits for approval and runs with the approved input;
 * errors (InProgressError, IntentKeyReusedError, OutcomeUnknownError, ...)
 * reach the model as the tool's error.
 */
export function guardTools<T extends Record<string, any>>(approvals: Approvals, tools: T, options: GuardToolsOptions = {}): T {
  const out: Record<string, ExecutableToolLike> = {};
  for (const [name, t] of Object.entries(tools) as [string, ExecutableToolLike][]) {
    const execute = t.execute;
    if (!execute || (options.only && !options.only.includes(name))) {
      out[name] = t;
      continue;
    }
    out[name] = {
      ...t,
      description: options.describe === false ? t.description : describeGuarded(t.description),
      execute: (input: Record<string, unknown>, execOptions: { abortSignal?: AbortSignal } | undefined) =>
        approvals.guard(options.names?.[name] ?? name, (payload) => execute(payload, execOptions), {
          waitFor: options.waitFor,
          intentKey: options.intentKeys?.[name],
          plan: planId(options.plan),
        })(input, { signal: execOptions?.abortSignal }),
    };
  }
  return out as T;
}

function planId(plan: GuardToolsOptions['plan']): string | undefined {
  const p = typeof plan === 'function' ? plan() : plan;
  return typeof p === 'string' ? p : p?.id;
}

function describeGuarded(description: unknown): unknown {
  if (typeof description === 'function') return (...args: unknown[]) => withGuidance(String(description(...args) ?? ''));
  return withGuidance(typeof description === 'string' ? description : undefined);
}
