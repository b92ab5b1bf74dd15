import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StateGraph, Annotation, MemorySaver, Command, START, END } from '@langchain/langgraph';
import { approvalNode, requestApproval } from '@approvals/sdk/langgraph';
import { useServer, rest } from './harness.mjs';
import { tools } from './tools.mjs';

const fx = useServer(tools);

const State = Annotation.Root({
  customer: Annotation(),
  outcome: Annotation(),
});

function emailGraph(world) {
  const send = approvalNode(fx.approvals, {
    tool: 'send_customer_email',
    payload: (s) => ({ customer_id: s.customer, topic: 'welcome', subject: `Welcome ${s.customer}` }),
    perform: async (p) => {
      world.push(p);
      return { message_id: `m_${world.length}` };
    },
    update: (outcome) => ({ outcome }),
  });
  return new StateGraph(State).addNode('send', send).addEdge(START, 'send').addEdge('send', END).compile({ checkpointer: new MemorySaver() });
}

test('the node interrupts while pending and, resumed after the approval, sends once', async () => {
  const world = [];
  const graph = emailGraph(world);
  const config = { configurable: { thread_id: 'lg-1' } };
  let res = await graph.invoke({ customer: 'lg-c1' }, config);
  const [pause] = res.__interrupt__;
  assert.equal(pause.value.type, 'approvals.pending');
  assert.equal(pause.value.intent_key, 'email:lg-c1:welcome');
  assert.equal(world.length, 0);

  // Resumed before anyone decided: it interrupts again, nothing is sent.
  res = await graph.invoke(new Command({ resume: 'approve it, please' }), config);
  assert.equal(res.__interrupt__?.length, 1);
  assert.equal(world.length, 0);
  assert.equal((await rest(fx.server, `/api/v1/actions/${pause.value.action_id}`)).state, 'pending');

  await fx.staff.approve(pause.value.action_id, 'welcome them');
  res = await graph.invoke(new Command({ resume: true }), config);
  assert.equal(res.__interrupt__, undefined);
  assert.deepEqual(res.outcome, { status: 'done', result: { message_id: 'm_1' } });
  assert.equal(world.length, 1);
  assert.equal((await rest(fx.server, `/api/v1/actions/${pause.value.action_id}`)).state, 'done');
});

test('a rejection resumes with the note, and nothing is sent', async () => {
  const world = [];
  const graph = emailGraph(world);
  const config = { configurable: { thread_id: 'lg-2' } };
  const res = await graph.invoke({ customer: 'lg-c2' }, config);
  await fx.staff.reject(res.__interrupt__[0].value.action_id, 'we already welcomed them');
  const out = await graph.invoke(new Command({ resume: true }), config);
  assert.equal(out.outcome.status, 'rejected');
  assert.equal(out.outcome.note, 'we already welcomed them');
  assert.equal(world.length, 0);
});

test('an exactly-once node claims at once: no interrupt, performed once', async () => {
  let refunds = 0;
  const refund = approvalNode(fx.approvals, {
    tool: 'issue_refund',
    payload: (s) => ({ order_id: s.customer, line_id: 1, amount: 4 }),
    perform: async () => ({ refund_id: `re_${++refunds}` }),
    update: (outcome) => ({ outcome }),
  });
  const graph = new StateGraph(State).addNode('refund', refund).addEdge(START, 'refund').addEdge('refund', END).compile({ checkpointer: new MemorySaver() });
  const out = await graph.invoke({ customer: 'lg-o1' }, { configurable: { thread_id: 'lg-3' } });
  assert.deepEqual(out.outcome, { status: 'done', result: { refund_id: 're_1' } });
  const again = await graph.invoke({ customer: 'lg-o1' }, { configurable: { thread_id: 'lg-4' } });
  assert.deepEqual(again.outcome, out.outcome, 'another thread with the same intent replays the result');
  assert.equal(refunds, 1);
});

test('requestApproval resumes with the approved (edited) payload', async () => {
  const Decided = Annotation.Root({ decision: Annotation() });
  const ask = async () => ({ decision: await requestApproval(fx.approvals, 'send_customer_email', { customer_id: 'lg-c5', topic: 'news', subject: 'News' }) });
  const graph = new StateGraph(Decided).addNode('ask', ask).addEdge(START, 'ask').addEdge('ask', END).compile({ checkpointer: new MemorySaver() });
  const config = { configurable: { thread_id: 'lg-5' } };
  const res = await graph.invoke({}, config);
  const id = res.__interrupt__[0].value.action_id;
  const _csrf = await fx.staff.csrf(`/actions/${id}`);
  const edited = { customer_id: 'lg-c5', topic: 'news', subject: 'Our news' };
  assert.equal((await fx.staff.request('POST', `/actions/${id}/approve`, { _csrf, note: 'better subject', payload: JSON.stringify(edited) })).status, 303);
  const out = await graph.invoke(new Command({ resume: true }), config);
  assert.equal(out.decision.approved, true);
  assert.deepEqual(out.decision.payload, edited);
});
