// The README's examples (this package's, the repository's "From your
// agent" and docs/sdk.md's framework adapters), type-checked by `npm run check:examples` against the built
// package, so that they cannot rot. Not run: payments, mailer and model
// stand for the reader's own.
import { Approvals, NotPerformedError } from '@approvals/sdk';
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
