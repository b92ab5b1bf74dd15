// The README's examples (this package's, the repository's "From your
// agent" and docs/sdk.md's framework adapters), type-checked by `npm run check:examples` against the built
// package, so that they cannot rot. Not run: payments, mailer and model
// stand for the reader's own.
import { Approvals, NotPerformedError, type ApprovedPlan } from '@approvals/sdk';
import { generateText, tool, stepCountIs, type LanguageModel } from 'ai';
import { guardTools } from '@approvals/sdk/ai';
import { Agent, run } from '@openai/agents';
import { guardedTool, resolveApprovals } from '@approvals/sdk/openai-agents';
import { StateGraph, MemorySaver, Command, START, END, Annotation } from '@langchain/langgraph';
import { approvalNode } from '@approvals/sdk/langgraph';
import { z } from 'zod';

declare const payments: { refund(p: unknown): Promise<{ declined: boolean; reason: string; id: string }> };
declare const mailer: { send(p: unknown): Promise<string> };
declare const model: LanguageModel;
const refundSchema = z.object({ order_id: z.string(), line_id: z.number(), amount: z.number() });
const emailSchema = z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() });
const State = Annotation.Root({ email: Annotation<Record<string, unknown>>(), outcome: Annotation<unknown>() });
const config = { configurable: { thread_id: 'thread-1' } };

export async function typescriptSdk() {
  const approvals = new Approvals({ url: 'http://localhost:8080', token: process.env.APPROVALS_TOKEN! });
  const refund = approvals.guard('issue_refund', async (p: { order_id: string; line_id: number; amount: number }) => {
    const r = await payments.refund(p);
    if (r.declined) throw new NotPerformedError(r.reason);
    return { refund_id: r.id };
  });
  return refund({ order_id: 'A-1001', line_id: 2, amount: 19.9 });
}

export async function aiSdk(approvals: Approvals) {
  const tools = guardTools(approvals, {
    issue_refund: tool({ description: 'Refund one order line.', inputSchema: refundSchema, execute: async (p) => payments.refund(p) }),
  });
  const { text } = await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: 'Refund the duplicate charge on order A-1001, line 2.' });
  return text;
}

// This package's README, "Plans".
export async function plans(approvals: Approvals) {
  const plan = await approvals.plan([
    { tool: 'issue_refund', payload: { order_id: 'A-1001', line_id: 2, amount: 19.9 } },
    { tool: 'send_customer_email', payload: { customer_id: 'c-42', topic: 'refund', subject: 'Your refund' } },
  ], { title: 'Refund A-1001 line 2 and tell the customer', waitFor: '10m' });
  const refund = plan.guard('issue_refund', async (p) => payments.refund(p));
  return refund({ order_id: 'A-1001', line_id: 2, amount: 19.9 });
}

// docs/sdk.md: a plan with the AI SDK.
export async function aiSdkPlan(approvals: Approvals) {
  const refundTool = tool({ description: 'Refund one order line.', inputSchema: refundSchema, execute: async (p) => payments.refund(p) });
  const emailTool = tool({ description: 'Email a customer.', inputSchema: emailSchema, execute: async (p) => mailer.send(p) });
  let plan: ApprovedPlan | undefined;
  const step = z.object({ tool: z.string(), payload: z.record(z.string(), z.unknown()), intent_key: z.string().optional() });
  const planned = {
    propose_plan: tool({ description: 'Propose every call of a piece of work at once; a person approves the plan.',
      inputSchema: z.object({ title: z.string(), steps: z.array(step) }),
      execute: async ({ title, steps }) => {
        plan = await approvals.plan(steps.map((s) => ({ tool: s.tool, payload: s.payload, intentKey: s.intent_key })), { title });
        return { plan_id: plan.id, state: plan.plan.state };
      } }),
    ...guardTools(approvals, { issue_refund: refundTool, send_customer_email: emailTool }, { plan: () => plan }),
  };
  const { text } = await generateText({ model, tools: planned, stopWhen: stepCountIs(8),
    prompt: 'Refund order A-1001 line 2 and tell the customer.' });
  return text;
}

export async function agentsSdk(approvals: Approvals) {
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Email a customer.',
    parameters: emailSchema,
    needsApproval: 'dry-run',
    execute: async (p) => mailer.send(p),
  });
  const agent = new Agent({ name: 'support', instructions: 'Help customers.', tools: [email] });
  let result = await run(agent, 'Tell c-42 their refund is on its way.');
  if (result.interruptions.length) {
    await resolveApprovals(result, { waitFor: '10m' });
    result = await run(agent, result.state);
  }
  return result.finalOutput;
}

export async function langGraph(approvals: Approvals, email: Record<string, unknown>) {
  const send = approvalNode(approvals, {
    tool: 'send_customer_email',
    payload: (s: typeof State.State) => s.email,
    perform: (p) => mailer.send(p),
    update: (outcome) => ({ outcome }),
  });
  const graph = new StateGraph(State).addNode('send', send).addEdge(START, 'send').addEdge('send', END).compile({ checkpointer: new MemorySaver() });
  await graph.invoke({ email }, config);
  return graph.invoke(new Command({ resume: true }), config);
}
