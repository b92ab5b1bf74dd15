import type { Action } from './openapi.js';
import type { Approvals } from './client.js';
import {
  ChangesRequestedError,
  InProgressError,
  NotApprovedError,
  NotPerformedError,
  OutcomeConflictError,
  OutcomeUnknownError,
  RejectedError,
  StillPendingError,
} from './errors.js';
import { toMs, type Duration } from './duration.js';

export interface GuardOptions<P> {
  /** How long to wait for a person's decision on an at-most-once call (default 10 minutes). */
  waitFor?: Duration;
  /** The intent key, or how to compute it from the payload; omit it when the tool's template derives it. */
  intentKey?: string | ((payload: P) => string);
  /**
   * Aborts the submission and the wait (the action stays as it is). Never
   * the report of a function that ran: its complete or fail is sent anyway.
   */
  signal?: AbortSignal;
  /**
   * How a pending action becomes decided; default: long-poll the server for
   * up to waitFor. The LangGraph adapter interrupts the graph instead.
   */
  awaitDecision?: (action: Action) => Promise<Action>;
  /** The approved plan each call is a step of (ApprovedPlan.guard sets it): submitted as `"plan"`. */
  plan?: string;
  /**
   * After an unknown outcome, ask the tool's verifier once and return the
   * stored result when it proves the effect done (default true).
   */
  verify?: boolean;
}

export interface GuardCallOptions {
  signal?: AbortSignal;
}

/** The guarded function: call it with the payload, as the original. */
export type GuardedFunction<P, R> = (payload: P, options?: GuardCallOptions) => Promise<R>;

export const defaultWaitFor = '10m';

/**
 * guard wraps fn, the function that performs tool's effect, in the
 * protocol (the README's "From your agent"):
 * - a claim (201 in_progress): call fn(payload) once, then complete;
 * - a replay: return the stored result; in_progress: InProgressError, fn never called;
 * - pending: wait for the decision; approved: execute, then fn(approved_payload) once;
 *   rejected / changes_requested: errors carrying the note;
 * - fn throws NotPerformedError: report fail, rethrow; anything else: report
 *   nothing, ask the tool's verifier once (POST .../verify): a proven `done`
 *   that approvals stored returns the stored result (the provider's record);
 *   any other verdict, no verifier or too many checks throws
 *   OutcomeUnknownError (the effect may have happened) with `check` set;
 * - fn returned: only complete is ever reported, never fail; a complete that
 *   meets another stored outcome throws OutcomeConflictError with
 *   performed: true and the result.
 */
export function guard<P extends Record<string, unknown>, R>(
  client: Approvals,
  tool: string,
  fn: (payload: P, action: Action) => R | Promise<R>,
  options: GuardOptions<P> = {},
): GuardedFunction<P, R> {
  const waitMs = toMs(options.waitFor ?? defaultWaitFor);
  return async (payload: P, call: GuardCallOptions = {}): Promise<R> => {
    const signal = call.signal && options.signal ? AbortSignal.any([call.signal, options.signal]) : (call.signal ?? options.signal);
    const intentKey = typeof options.intentKey === 'function' ? options.intentKey(payload) : options.intentKey;
    const sub = await client.submit(tool, payload, { intentKey, signal, plan: options.plan });
    let a = sub.action;

    // After an unknown outcome: ask the system of record once (never perform
    // again). A proof of `done` that approvals stored is the result;
    // anything else leaves the action to reconciliation and throws unknown.
    const settle = async (unknown: OutcomeUnknownError): Promise<R> => {
      if (options.verify === false) throw unknown;
      try {
        const check = await client.verify(unknown.action.id, { once: true, signal });
        unknown.check = check;
        if (check.verdict !== 'done') throw unknown;
        const a = check.action ?? (await client.get(unknown.action.id, { signal }));
        if (a.state === 'done') return a.result as R;
      } catch (err) {
        if (err === unknown) throw err;
        unknown.check ??= err instanceof Error ? err : new Error(String(err));
      }
      throw unknown;
    };

    const perform = async (claimed: Action, input: P): Promise<R> => {
      let result: R;
      try {
        result = await fn(input, claimed);
      } catch (err) {
        if (err instanceof NotPerformedError) {
          // The one report that releases the intent: only for a definite non-effect.
          // A report that does not arrive leaves the action in progress for
          // an operator; the caller still learns the truth.
          // Not aborted by the signal: the function ran and knows.
          await client.fail(claimed.id, err.message || 'not performed').catch(() => undefined);
          throw err;
        }
        return settle(new OutcomeUnknownError(claimed, err, false, undefined, client));
      }
      try {
        // Not aborted by the signal: the effect happened, and only this
        // report spares an operator the ticket.
        await client.complete(claimed.id, result);
      } catch (err) {
        // fn ran and returned: the effect happened, whatever the report
        // meets. Never report fail from here; say performed, with the result.
        if (err instanceof OutcomeConflictError) throw OutcomeConflictError.afterPerformed(err, result);
        return settle(new OutcomeUnknownError(claimed, err, true, result, client));
      }
      return result;
    };

    switch (a.state) {
      case 'recorded':
        // At-least-once: recorded, and repeating it is harmless.
        return fn(payload, a);
      case 'in_progress':
        if (sub.created) return perform(a, payload);
        throw inProgress(a);
      case 'done':
        return a.result as R;
      case 'pending':
        a = options.awaitDecision ? await options.awaitDecision(a) : await client.get(a.id, { wait: waitMs, state: 'pending', signal });
        break;
      case 'approved':
        break;
      default:
        throw notApproved(a);
    }
    switch (a.state) {
      case 'approved': {
        const claimed = await client.execute(a.id, { signal });
        return perform(claimed, (claimed.approved_payload ?? claimed.payload) as P);
      }
      case 'done':
        return a.result as R; // executed elsewhere (a webhook executor)
      case 'pending':
        throw new StillPendingError(a, waitMs);
      case 'in_progress':
        throw inProgress(a);
      default:
        throw notApproved(a);
    }
  };
}

function inProgress(a: Action): InProgressError {
  return new InProgressError({
    status: 409,
    code: 'in_progress',
    detail: `action ${a.id} for intent ${JSON.stringify(a.intent_key)} is being performed: do not act; read it later`,
    action: a,
  });
}

function notApproved(a: Action): NotApprovedError {
  if (a.state === 'rejected') return new RejectedError(a);
  if (a.state === 'changes_requested') return new ChangesRequestedError(a);
  return new NotApprovedError(a);
}
