// The LangGraph adapter (@langchain/langgraph): a node that submits the
// call, interrupt()s the graph while a person decides, and on resume reads
// the decision from approvals (never from the resume value: whoever resumes
// the graph cannot approve anything by doing so).
import { interrupt } from '@langchain/langgraph';
import type { Approvals } from './client.js';
import type { Action } from './openapi.js';
import { NotApprovedError } from './errors.js';

/** What the graph's interrupt carries: enough to show and find the action. */
export interface ApprovalInterrupt {
  type: 'approvals.pending';
  action_id: string;
  tool: string;
  intent_key: string;
  payload: Record<string, unknown>;
  /** The action's page on the dashboard. */
  url: string;
}

/**
 * awaitDecision for guard inside a LangGraph node: interrupts while the
 * action is pending. LangGraph re-runs the node on resume; the submission
 * then replays, the interrupt returns, and the decision is read from
 * approvals. Still pending: it interrupts again.
 */
export function interruptUntilDecided(approvals: Approvals): (action: Action) => Promise<Action> {
  return async (action) => {
    let a = action;
    while (a.state === 'pending') {
      const value: ApprovalInterrupt = {
        type: 'approvals.pending',
        action_id: a.id,
        tool: a.tool,
        intent_key: a.intent_key,
        payload: a.payload,
        url: `${approvals.url}/actions/${a.id}`,
      };
      interrupt(value);
      a = await approvals.get(a.id);
    }
    return a;
  };
}

export type Decision =
  | { approved: true; payload: Record<string, unknown>; action: Action }
  | { approved: false; state: Action['state']; note: string | null; action: Action };

/**
 * Submits a call and, inside a node, interrupts until a person decides it;
 * answers the decision: the approved payload (possibly edited), or the note.
 * The caller performs an approved call itself (execute, then complete);
 * approvalNode does all of it.
 */
export async function requestApproval(
  approvals: Approvals,
  tool: string,
  payload: Record<string, unknown>,
  options: { intentKey?: string } = {},
): Promise<Decision> {
  let { action } = await approvals.submit(tool, payload, options);
  action = await interruptUntilDecided(approvals)(action);
  if (action.state === 'approved') return { approved: true, payload: action.approved_payload ?? action.payload, action };
  return { approved: false, state: action.state, note: action.decision_note, action };
}

export type NodeOutcome<R> =
  | { status: 'done'; result: R }
  | { status: 'rejected' | 'changes_requested' | 'expired' | 'cancelled' | 'failed'; note: string | null; action: Action };

export interface ApprovalNodeOptions<S, P extends Record<string, unknown>, R> {
  /** The tool's name in approvals' tools file. */
  tool: string;
  /** The call's payload, from the graph's state. */
  payload: (state: S) => P;
  /** The intent key, or how to compute it; omit it where the tools file's template derives it. */
  intentKey?: string | ((payload: P) => string);
  /** Performs the effect once, with what was approved. */
  perform: (payload: P, state: S) => R | Promise<R>;
  /** The state update from the outcome. */
  update: (outcome: NodeOutcome<R>, state: S) => Partial<S> | Record<string, unknown>;
}

/**
 * A LangGraph node guarded by approvals: it submits the call, interrupts
 * the graph while the action is pending, and on resume performs the
 * approved call once (execute, perform, complete), or passes the decision
 * and its note to update. The graph needs a checkpointer, as for any
 * interrupt.
 */
export function approvalNode<S, P extends Record<string, unknown>, R>(approvals: Approvals, options: ApprovalNodeOptions<S, P, R>) {
  return async (state: S) => {
    try {
      const result = await approvals.guard<P, R>(options.tool, (p) => options.perform(p, state), {
        intentKey: options.intentKey,
        awaitDecision: interruptUntilDecided(approvals),
      })(options.payload(state));
      return options.update({ status: 'done', result }, state);
    } catch (err) {
      if (err instanceof NotApprovedError && err.state !== 'pending') {
        return options.update({ status: err.state as Exclude<NodeOutcome<R>['status'], 'done'>, note: err.note, action: err.action }, state);
      }
      throw err;
    }
  };
}
