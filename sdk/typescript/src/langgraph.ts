// The LangGraph adapter (@langchain/langgraph): a node that submits the
// call, interrupt()s the graph while a person decides, and on resume reads
// the decision from approvals (never from the resume value: whoever resumes
// the graph cannot approve anything by doing so); and guardedTool, a
// LangChain tool for the prebuilt ToolNode loop whose every outcome, a
// refusal included, is a ToolMessage answering the model's tool call.
import { interrupt, isGraphInterrupt } from '@langchain/langgraph';
import { ToolMessage, isAIMessage, type BaseMessage } from '@langchain/core/messages';
import { tool as langchainTool } from '@langchain/core/tools';
import type { Approvals } from './client.js';
import type { Action } from './openapi.js';
import type { Duration } from './duration.js';
import { ApprovalsError, NotApprovedError, OutcomeUnknownError, StillPendingError, describe as describeError } from './errors.js';
import { withGuidance } from './guidance.js';

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
  | {
      status: 'rejected' | 'changes_requested' | 'expired' | 'cancelled' | 'failed';
      note: string | null;
      action: Action;
      /** What a model should read: who decided, the note, what to do next. */
      message: string;
    }
  | {
      /**
       * The guard refused or could not finish (IntentKeyReusedError,
       * InProgressError, OutcomeUnknownError, ...): the error, and its
       * message, written for a model (what happened, what to do next).
       */
      status: 'error';
      error: Error;
      message: string;
      action?: Action;
    };

export interface ApprovalNodeOptions<S, P extends Record<string, unknown>, R> {
  /** The tool's name in approvals' tools file. */
  tool: string;
  /**
   * The call's payload, from the graph's state. Omit it (and update) in a
   * messages graph: the node then answers the last AI message's tool calls
   * named toolName (default tool), each with a ToolMessage.
   */
  payload?: (state: S) => P;
  /** The model's name of the tool, when it differs from tool (messages mode). */
  toolName?: string;
  /** The intent key, or how to compute it; omit it where the tools file's template derives it. */
  intentKey?: string | ((payload: P) => string);
  /** Performs the effect once, with what was approved. */
  perform: (payload: P, state: S) => R | Promise<R>;
  /** The state update from the outcome; required with payload (in messages mode the node answers {messages: [ToolMessage, ...]}). */
  update?: (outcome: NodeOutcome<R>, state: S) => Partial<S> | Record<string, unknown>;
}

/**
 * A LangGraph node guarded by approvals: it submits the call, interrupts
 * the graph while the action is pending, and on resume performs the
 * approved call once (execute, perform, complete), or passes the decision
 * and its note to update. A refusal or an unknown outcome is an outcome
 * too (status 'error', with the message a model should read), never an
 * exception out of graph.invoke. The graph needs a checkpointer, as for any
 * interrupt.
 *
 * Without payload, in a graph whose state has messages, the node answers
 * each unanswered tool call named toolName of the last AI message with a
 * ToolMessage carrying its tool_call_id: the result, or what the model
 * should read (the reviewer's note, the refusal's guidance).
 */
export function approvalNode<S, P extends Record<string, unknown>, R>(approvals: Approvals, options: ApprovalNodeOptions<S, P, R>) {
  const run = async (payload: P, state: S): Promise<NodeOutcome<R>> => {
    try {
      const result = await approvals.guard<P, R>(options.tool, (p) => options.perform(p, state), {
        intentKey: options.intentKey,
        awaitDecision: interruptUntilDecided(approvals),
      })(payload);
      return { status: 'done', result };
    } catch (err) {
      if (isGraphInterrupt(err)) throw err;
      if (err instanceof NotApprovedError && err.state !== 'pending') {
        return { status: err.state as 'rejected', note: err.note, action: err.action, message: err.message };
      }
      const error = err instanceof Error ? err : new Error(String(err));
      return { status: 'error', error, message: error.message, action: actionOf(err) };
    }
  };
  return async (state: S) => {
    if (options.payload) {
      if (!options.update) throw new Error(`approvalNode ${options.tool}: update is required with payload`);
      return options.update(await run(options.payload(state), state), state);
    }
    const name = options.toolName ?? options.tool;
    const messages: BaseMessage[] = Array.isArray((state as any)?.messages) ? (state as any).messages : [];
    const answered = new Set(messages.filter((m) => m.getType() === 'tool').map((m) => (m as ToolMessage).tool_call_id));
    const last = [...messages].reverse().find((m) => isAIMessage(m));
    if (!last || !isAIMessage(last)) {
      throw new Error(`approvalNode ${options.tool}: without payload the state needs messages with an AI message's tool calls`);
    }
    const out: ToolMessage[] = [];
    for (const call of last.tool_calls ?? []) {
      if (call.name !== name || (call.id && answered.has(call.id))) continue;
      const outcome = await run(call.args as P, state);
      out.push(outcomeMessage(outcome, { toolCallId: call.id ?? '', name }));
    }
    return { messages: out };
  };
}

/** The ToolMessage answering a tool call with a node's outcome. */
export function outcomeMessage<R>(outcome: NodeOutcome<R>, call: { toolCallId: string; name: string }): ToolMessage {
  if (outcome.status === 'done') {
    return new ToolMessage({ status: 'success', name: call.name, tool_call_id: call.toolCallId, content: asContent(outcome.result) });
  }
  return new ToolMessage({
    status: 'error',
    name: call.name,
    tool_call_id: call.toolCallId,
    content: outcome.message,
    artifact: { status: outcome.status, ...(outcome.status === 'error' ? { code: codeOf(outcome.error) } : {}), action_id: outcome.action?.id },
  });
}

export interface GuardedToolOptions<P extends Record<string, unknown>> {
  /** The tool's name for the model. */
  name: string;
  description: string;
  /** A zod object schema or a JSON Schema, as for LangChain's tool(). */
  schema: any;
  /** Performs the effect; called at most once per intent. */
  func: (input: P, config?: any) => unknown;
  /** The tool's name in approvals' tools file (default: name). */
  approvalsTool?: string;
  /** The intent key, or how to compute it; omit it where the tools file's template derives it. */
  intentKey?: string | ((input: P) => string);
  /** How long an at-most-once call waits inside the tool for a person (default 10 minutes). */
  waitFor?: Duration;
  /**
   * 'interrupt': while the action is pending, interrupt() the graph (it
   * needs a checkpointer) and, on resume, read the decision from approvals.
   * Default 'wait': long-poll for up to waitFor, then answer the model that
   * the call is still waiting for a person.
   */
  pending?: 'wait' | 'interrupt';
  /** Append the guard's guidance to the description (default true). */
  describe?: boolean;
}

/**
 * A LangChain tool (for the prebuilt ToolNode, or any tool-calling loop)
 * whose func is guarded by approvals. Every outcome answers the tool call
 * with a ToolMessage carrying its tool_call_id: the result; or, for a
 * refusal (a rephrased call, in progress, under review), a rejection, a call
 * still pending or an unknown outcome, status 'error' and the guard's
 * message, which says what happened and what to do next. ToolNode passes a
 * ToolMessage through unchanged, so its "Please fix your mistakes" never
 * follows a "do not call again".
 */
export function guardedTool<P extends Record<string, unknown>>(approvals: Approvals, options: GuardedToolOptions<P>) {
  const name = options.approvalsTool ?? options.name;
  return langchainTool(
    async (input: P, config?: any): Promise<unknown> => {
      const toolCallId: string | undefined = config?.toolCall?.id ?? config?.toolCallId;
      try {
        const result = await approvals.guard<P, unknown>(name, (payload) => options.func(payload, config), {
          waitFor: options.waitFor,
          intentKey: options.intentKey,
          awaitDecision: options.pending === 'interrupt' ? interruptUntilDecided(approvals) : undefined,
        })(input, { signal: config?.signal });
        return typeof result === 'string' ? result : JSON.stringify(result ?? null);
      } catch (err) {
        if (isGraphInterrupt(err)) throw err;
        const message = describeError(err);
        // Invoked without a tool call (tool.invoke(args)) there is no
        // message to answer: the error is thrown, as from any tool.
        if (!toolCallId) throw err;
        return new ToolMessage({
          status: 'error',
          name: options.name,
          tool_call_id: toolCallId,
          content: message,
          artifact: { code: codeOf(err), action_id: actionOf(err)?.id },
        });
      }
    },
    {
      name: options.name,
      description: options.describe === false ? options.description : withGuidance(options.description),
      schema: options.schema,
    },
  );
}

function asContent(result: unknown): string {
  return typeof result === 'string' ? result : JSON.stringify(result ?? null);
}

/** The problem code, or the error's kind for the SDK's own errors. */
function codeOf(err: unknown): string {
  if (err instanceof ApprovalsError) return err.code;
  if (err instanceof StillPendingError) return 'still_pending';
  if (err instanceof OutcomeUnknownError) return 'outcome_unknown';
  if (err instanceof NotApprovedError) return err.state;
  return err instanceof Error ? err.name : 'error';
}

function actionOf(err: unknown): Action | undefined {
  if (err instanceof ApprovalsError || err instanceof StillPendingError || err instanceof OutcomeUnknownError || err instanceof NotApprovedError) {
    return err.action;
  }
  return undefined;
}
