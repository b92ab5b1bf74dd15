// The agent-layer test (docs/sdk.md, "Agent frameworks"): the real AI SDK loop, driven
// by a scripted model, calls a guarded tool whose first call performs the
// effect and then loses the answer (a proxy between the SDK and the server
// drops every answer to the report once the server has acted), and whose
// second call is rephrased: same intent, other wording. The world sees
// exactly one effect, for an exactly-once and for an at-most-once tool.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { Approvals, guardedToolGuidance } from '@approvals/sdk';
import { guardTools } from '@approvals/sdk/ai';
import { startServer, Staff, pendingAction, rest, startLossyProxy } from './harness.mjs';
import { tools } from './tools.mjs';
import { scriptedModel, toolCall, toolOutputs } from './scripted-ai-model.mjs';

let server, staff, proxy, approvals;
before(async () => {
  server = await startServer(tools);
  staff = await new Staff(server.url).login();
  proxy = await startLossyProxy(server.url);
  // The proxy loses every answer to the first call's report: a short retry
  // budget ends its retries (the default, 60 s, is for a failover).
  approvals = new Approvals({ url: proxy.url, token: server.token, retry: { baseDelayMs: 20, budgetMs: 2_000 } });
});
after(async () => {
  await proxy?.close();
  await server?.stop();
});

// The model: call the tool; when the call fails, rephrase and call again
// (what a model does after a timeout); then answer with what it saw.
function rephrasingModel(name, first, second) {
  return scriptedModel([
    [toolCall('call-1', name, first)],
    (prompt) => {
      const [out] = toolOutputs(prompt);
      assert.equal(out.type, 'error-text', 'the first call failed for the model');
      return [toolCall('call-2', name, second)];
    },
    (prompt) => [{ type: 'text', text: JSON.stringify(toolOutputs(prompt)) }],
  ]);
}

test('exactly-once: the effect happens once although the first answer was lost and the call was rephrased', async () => {
  const world = []; // the payment provider's refunds
  const toolset = guardTools(approvals, {
    issue_refund: tool({
      description: 'Refund one order line.',
      inputSchema: z.object({ order_id: z.string(), line_id: z.number(), amount: z.number(), reason: z.string() }),
      execute: async (p) => {
        world.push(p);
        return { refund_id: `re_${world.length}` };
      },
    }),
  });
  // Lose the answers to the first call's report, retries included.
  proxy.setDrop((line) => line.includes('/complete') && world.length === 1);
  const model = rephrasingModel(
    'issue_refund',
    { order_id: 'A-1', line_id: 2, amount: 19.9, reason: 'Customer was charged twice.' },
    { order_id: 'A-1', line_id: 2, amount: 19.9, reason: 'Refund the duplicate charge on line 2.' },
  );
  const res = await generateText({ model, prompt: 'Refund the duplicate charge on order A-1 line 2.', tools: toolset, stopWhen: stepCountIs(5) });

  assert.equal(world.length, 1, 'exactly one real refund');
  assert.ok(proxy.dropped.some((l) => l.includes('/complete')), 'the report answer was lost');
  const [first, second] = JSON.parse(res.text);
  assert.match(first.text, /OutcomeUnknownError|did not record its outcome/);
  assert.match(first.text, /do not call this tool again/);
  assert.match(second.text, /intent_key_reused/);
  assert.ok(model.doGenerateCalls[0].tools[0].description.includes(guardedToolGuidance), 'the model was told not to rephrase');
  const list = await rest(server, '/api/v1/actions?intent_key=refund:A-1:2');
  assert.deepEqual(list.actions.map((a) => a.state), ['done'], 'one action, done: the lost report reached the server');
});

test('at-most-once: one approval, one email, although the first answer was lost and the call was rephrased', async () => {
  const world = []; // the mail provider's outbox
  const toolset = guardTools(
    approvals,
    {
      send_customer_email: tool({
        description: 'Send one email to a customer.',
        inputSchema: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string(), body: z.string() }),
        execute: async (p) => {
          world.push(p);
          return { message_id: `m_${world.length}` };
        },
      }),
    },
    { waitFor: '30s' },
  );
  proxy.setDrop((line) => line.includes('/complete') && world.length === 1);
  const model = rephrasingModel(
    'send_customer_email',
    { customer_id: 'c-7', topic: 'refund', subject: 'Your refund', body: 'We refunded the duplicate charge.' },
    { customer_id: 'c-7', topic: 'refund', subject: 'Refund issued', body: 'Good news: your refund is on its way.' },
  );
  const run = generateText({ model, prompt: 'Tell customer c-7 about the refund.', tools: toolset, stopWhen: stepCountIs(5) });
  const pending = await pendingAction(server, 'email:c-7:refund');
  await staff.approve(pending.id, 'ok to send');
  const res = await run;

  assert.equal(world.length, 1, 'exactly one real email');
  assert.deepEqual(world[0].subject, 'Your refund', 'the approved wording was sent');
  const [first, second] = JSON.parse(res.text);
  assert.match(first.text, /did not record its outcome/);
  assert.match(second.text, /intent_key_reused/);
  const list = await rest(server, '/api/v1/actions?intent_key=email:c-7:refund');
  assert.equal(list.actions.length, 1, 'one action: the rephrased call created none');
  assert.equal(list.actions[0].state, 'done');
});
