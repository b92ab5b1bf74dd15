// LangGraph's own loops with a scripted chat model (no network): the
// prebuilt ToolNode running guardedTool, and approvalNode answering the
// model's tool calls in a messages graph. Every tool call gets a tool reply,
// the world sees one effect per intent, and nothing the model reads invites
// a blind retry (ToolNode's "Please fix your mistakes" never follows a
// refusal).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { StateGraph, MessagesAnnotation, MemorySaver, Command, START, END } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { Approvals, guardedToolGuidance, refusalGuidance } from '@approvals/sdk';
import { guardedTool, approvalNode } from '@approvals/sdk/langgraph';
import { startServer, Staff, rest, startLossyProxy } from './harness.mjs';
import { tools } from './tools.mjs';
import { ScriptedChatModel, call, toolReplies } from './scripted-chat-model.mjs';

let server, staff, proxy, approvals, lossy;
before(async () => {
  server = await startServer(tools);
  staff = await new Staff(server.url).login();
  proxy = await startLossyProxy(server.url);
  approvals = new Approvals({ url: server.url, token: server.token });
  lossy = new Approvals({ url: proxy.url, token: server.token, retry: { baseDelayMs: 20, budgetMs: 2_000 } });
});
after(async () => {
  await proxy?.close();
  await server?.stop();
});

const refundSchema = z.object({ order_id: z.string(), line_id: z.number(), amount: z.number(), reason: z.string() });
const emailSchema = z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() });

function refundTool(client, world) {
  return guardedTool(client, {
    name: 'issue_refund',
    description: 'Refund one order line.',
    schema: refundSchema,
    func: async (p) => {
      world.push(p);
      return { refund_id: `re_${world.length}` };
    },
  });
}

/** The prebuilt loop: agent, then ToolNode while the model calls tools. */
function toolLoop(model, toolset) {
  const bound = model.bindTools(toolset);
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => ({ messages: [await bound.invoke(s.messages)] }))
    .addNode('tools', new ToolNode(toolset))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer: new MemorySaver() });
}

/** Every AI tool call in the thread has exactly one tool reply with its id. */
function assertEveryCallAnswered(messages) {
  const calls = messages.filter((m) => m.getType() === 'ai').flatMap((m) => m.tool_calls ?? []);
  const replies = toolReplies(messages).map((m) => m.tool_call_id);
  assert.deepEqual(replies.sort(), calls.map((c) => c.id).sort());
}

function assertNoBlindRetry(reply) {
  assert.doesNotMatch(reply.content, /fix your mistakes/i);
  assert.match(reply.content, /do not call/i);
}

test('ToolNode: the answer of the first call is lost, the model rephrases, and the refund happens once', async () => {
  const world = [];
  const refund = refundTool(lossy, world);
  proxy.setDrop((line) => line.includes('/complete') && world.length === 1);
  const model = new ScriptedChatModel([
    { tool_calls: [call('c1', 'issue_refund', { order_id: 'TN-1', line_id: 2, amount: 19.9, reason: 'damaged' })] },
    (messages) => {
      const [first] = toolReplies(messages);
      assert.equal(first.status, 'error', 'the first call failed for the model');
      return { tool_calls: [call('c2', 'issue_refund', { order_id: 'TN-1', line_id: 2, amount: 19.9, reason: 'arrived damaged' })] };
    },
    { content: 'done' },
  ]);
  const out = await toolLoop(model, [refund]).invoke(
    { messages: [{ role: 'user', content: 'refund line 2 of TN-1' }] },
    { configurable: { thread_id: 'tn-1' } },
  );
  proxy.setDrop(() => false);

  assert.equal(world.length, 1, 'one real refund');
  assert.match(model.tools[0].description, /Refund one order line\./);
  assert.ok(model.tools[0].description.includes(guardedToolGuidance), 'the model is told not to rephrase');
  assertEveryCallAnswered(out.messages);
  const [first, second] = toolReplies(out.messages);
  assert.equal(first.tool_call_id, 'c1');
  assert.equal(first.artifact.code, 'outcome_unknown');
  assertNoBlindRetry(first);
  assert.equal(second.tool_call_id, 'c2');
  assert.equal(second.status, 'error');
  assert.equal(second.artifact.code, 'intent_key_reused');
  assert.ok(second.content.includes(refusalGuidance.intent_key_reused), second.content);
  assertNoBlindRetry(second);
});

test('ToolNode: a replay answers with the stored result, a success is a plain tool reply', async () => {
  const world = [];
  const refund = refundTool(approvals, world);
  const args = { order_id: 'TN-2', line_id: 1, amount: 5, reason: 'late' };
  const model = new ScriptedChatModel([{ tool_calls: [call('a1', 'issue_refund', args)] }, { tool_calls: [call('a2', 'issue_refund', args)] }, { content: 'ok' }]);
  const out = await toolLoop(model, [refund]).invoke({ messages: [{ role: 'user', content: 'refund' }] }, { configurable: { thread_id: 'tn-2' } });
  const [a, b] = toolReplies(out.messages);
  assert.equal(a.status, 'success');
  assert.deepEqual(JSON.parse(a.content), { refund_id: 're_1' });
  assert.equal(b.tool_call_id, 'a2');
  assert.deepEqual(JSON.parse(b.content), { refund_id: 're_1' }, 'the same call replays the stored result');
  assert.equal(world.length, 1);
});

test('ToolNode: an at-most-once call still pending answers the model that it waits for a person', async () => {
  const sent = [];
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Send one email to a customer.',
    schema: emailSchema,
    waitFor: '300ms',
    func: async (p) => sent.push(p),
  });
  const model = new ScriptedChatModel([{ tool_calls: [call('e1', 'send_customer_email', { customer_id: 'tn-c3', topic: 'welcome', subject: 'Hi' })] }, { content: 'waiting' }]);
  const out = await toolLoop(model, [email]).invoke({ messages: [{ role: 'user', content: 'welcome them' }] }, { configurable: { thread_id: 'tn-3' } });
  const [reply] = toolReplies(out.messages);
  assert.equal(reply.tool_call_id, 'e1');
  assert.equal(reply.status, 'error');
  assert.equal(reply.artifact.code, 'still_pending');
  assert.match(reply.content, /still waiting for a person/);
  assert.doesNotMatch(reply.content, /fix your mistakes/i);
  assert.equal(sent.length, 0);
});

test("ToolNode with pending: 'interrupt': the graph pauses for the decision, then sends once", async () => {
  const sent = [];
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Send one email to a customer.',
    schema: emailSchema,
    pending: 'interrupt',
    func: async (p) => {
      sent.push(p);
      return 'sent';
    },
  });
  const model = new ScriptedChatModel([{ tool_calls: [call('e2', 'send_customer_email', { customer_id: 'tn-c4', topic: 'welcome', subject: 'Hi' })] }, { content: 'sent' }]);
  const graph = toolLoop(model, [email]);
  const config = { configurable: { thread_id: 'tn-4' } };
  const paused = await graph.invoke({ messages: [{ role: 'user', content: 'welcome them' }] }, config);
  const [pause] = paused.__interrupt__;
  assert.equal(pause.value.type, 'approvals.pending');
  assert.equal(sent.length, 0);
  await staff.approve(pause.value.action_id, 'fine');
  const out = await graph.invoke(new Command({ resume: true }), config);
  assert.equal(out.__interrupt__, undefined);
  const [reply] = toolReplies(out.messages);
  assert.equal(reply.tool_call_id, 'e2');
  assert.equal(reply.status, 'success');
  assert.equal(reply.content, 'sent');
  assert.equal(sent.length, 1);
  assertEveryCallAnswered(out.messages);
});

/**
 * The README's routing: calls to the at-most-once tool go to its
 * approvalNode, which answers them; ToolNode then answers the rest (it skips
 * calls that already have a reply); then back to the model.
 */
function routedGraph(model, toolset, emailNode) {
  const bound = model.bindTools([...toolset, { name: 'send_customer_email', description: 'Send one email to a customer.', schema: emailSchema }]);
  const route = (s) => {
    const last = s.messages.at(-1);
    const calls = last?.tool_calls ?? [];
    if (calls.some((c) => c.name === 'send_customer_email')) return 'send_email';
    return calls.length ? 'tools' : END;
  };
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => ({ messages: [await bound.invoke(s.messages)] }))
    .addNode('send_email', emailNode)
    .addNode('tools', new ToolNode(toolset))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', route, ['send_email', 'tools', END])
    .addEdge('send_email', 'tools')
    .addEdge('tools', 'agent')
    .compile({ checkpointer: new MemorySaver() });
}

test('approvalNode answers its tool calls with tool messages: approval, then a rephrased call refused without an exception', async () => {
  const sent = [];
  const refunds = [];
  const emailNode = approvalNode(approvals, {
    tool: 'send_customer_email',
    perform: async (p) => {
      sent.push(p);
      return { message_id: `m_${sent.length}` };
    },
  });
  const model = new ScriptedChatModel([
    {
      tool_calls: [
        call('r1', 'issue_refund', { order_id: 'AN-1', line_id: 1, amount: 3, reason: 'late' }),
        call('m1', 'send_customer_email', { customer_id: 'an-c1', topic: 'sorry', subject: 'Sorry' }),
      ],
    },
    { tool_calls: [call('m2', 'send_customer_email', { customer_id: 'an-c1', topic: 'sorry', subject: 'We are sorry' })] },
    { content: 'done' },
  ]);
  const graph = routedGraph(model, [refundTool(approvals, refunds)], emailNode);
  const config = { configurable: { thread_id: 'an-1' } };
  const paused = await graph.invoke({ messages: [{ role: 'user', content: 'refund and apologise' }] }, config);
  const [pause] = paused.__interrupt__;
  assert.equal(pause.value.intent_key, 'email:an-c1:sorry');
  await staff.approve(pause.value.action_id, 'ok');
  const out = await graph.invoke(new Command({ resume: true }), config);
  assert.equal(out.__interrupt__, undefined, 'the rephrased call did not throw out of invoke nor pause');
  assertEveryCallAnswered(out.messages);
  const replies = Object.fromEntries(toolReplies(out.messages).map((m) => [m.tool_call_id, m]));
  assert.deepEqual(JSON.parse(replies.m1.content), { message_id: 'm_1' });
  assert.deepEqual(JSON.parse(replies.r1.content), { refund_id: 're_1' });
  assert.equal(replies.m2.status, 'error');
  assert.equal(replies.m2.artifact.code, 'intent_key_reused');
  assertNoBlindRetry(replies.m2);
  assert.equal(sent.length, 1);
  assert.equal(refunds.length, 1);
});

test('approvalNode: a rejection answers the tool call with the note', async () => {
  const sent = [];
  const emailNode = approvalNode(approvals, { tool: 'send_customer_email', perform: async (p) => sent.push(p) });
  const model = new ScriptedChatModel([
    { tool_calls: [call('m3', 'send_customer_email', { customer_id: 'an-c2', topic: 'promo', subject: 'Buy' })] },
    { content: 'understood' },
  ]);
  const graph = routedGraph(model, [refundTool(approvals, [])], emailNode);
  const config = { configurable: { thread_id: 'an-2' } };
  const paused = await graph.invoke({ messages: [{ role: 'user', content: 'promote' }] }, config);
  await staff.reject(paused.__interrupt__[0].value.action_id, 'no promotions this month');
  const out = await graph.invoke(new Command({ resume: true }), config);
  const [reply] = toolReplies(out.messages);
  assert.equal(reply.tool_call_id, 'm3');
  assert.equal(reply.status, 'error');
  assert.equal(reply.artifact.status, 'rejected');
  assert.match(reply.content, /no promotions this month/);
  assert.equal(sent.length, 0);
  assert.equal((await rest(server, `/api/v1/actions/${paused.__interrupt__[0].value.action_id}`)).state, 'rejected');
});
