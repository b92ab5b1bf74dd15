// A scripted Model for the OpenAI Agents SDK: each turn answers with the
// next step, which may read the request (the tool outputs so far). No
// network: the Agent is given this Model instance, and tracing is off.
import { Agent, Usage, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { guardedTool } from '@approvals/sdk/openai-agents';

setTracingDisabled(true);

export function functionCall(callId, name, input) {
  return { type: 'function_call', id: `fc_${callId}`, callId, name, arguments: JSON.stringify(input), status: 'completed' };
}

export function message(text) {
  return { type: 'message', id: `msg_${Math.random().toString(36).slice(2)}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] };
}

/** The outputs of the tool calls the model was shown, in order, as text. */
export function functionOutputs(request) {
  const items = Array.isArray(request.input) ? request.input : [];
  return items
    .filter((i) => i.type === 'function_call_result')
    .map((i) => (typeof i.output === 'string' ? i.output : i.output?.text ?? JSON.stringify(i.output)));
}

export class ScriptedModel {
  constructor(steps) {
    this.steps = steps;
    this.requests = [];
  }
  async getResponse(request) {
    this.requests.push(request);
    const step = this.steps[Math.min(this.requests.length - 1, this.steps.length - 1)];
    const output = typeof step === 'function' ? step(request) : step;
    return { usage: new Usage(), output, responseId: `resp_${this.requests.length}` };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error('the scripted model does not stream');
  }
}

/**
 * An agent with one guarded send_customer_email tool (toolOptions add to
 * it) whose model emails customer about topic once, then answers with what
 * the tool said. world holds what was sent.
 */
export function mailer(approvals, customer, topic, toolOptions = {}) {
  const world = [];
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Email a customer.',
    parameters: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
    ...toolOptions,
    execute: async (p) => {
      world.push(p);
      return 'sent';
    },
  });
  const model = new ScriptedModel([
    [functionCall('c1', 'send_customer_email', { customer_id: customer, topic, subject: 'Hi' })],
    (req) => [message(functionOutputs(req).join('\n'))],
  ]);
  return { agent: new Agent({ name: 'mailer', instructions: 'Mail.', model, tools: [email] }), world };
}
