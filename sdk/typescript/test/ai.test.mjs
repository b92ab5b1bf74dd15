import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { guardedToolGuidance } from '@approvals/sdk';
import { guardTools } from '@approvals/sdk/ai';
import { guardTools as guardToolsFromRoot } from '@approvals/sdk';
import { useServer, pendingAction } from './harness.mjs';
import { tools } from './tools.mjs';
import { scriptedModel, toolCall, toolOutputs } from './scripted-ai-model.mjs';

const fx = useServer(tools);

test('guardTools is exported from the package root too', () => {
  assert.equal(guardToolsFromRoot, guardTools);
});

test('the AI SDK loop: a guarded exactly-once tool runs once, a repeated call replays its result', async () => {
  let refunds = 0;
  const toolset = guardTools(fx.approvals, {
    issue_refund: tool({
      description: 'Refund one order line.',
      inputSchema: z.object({ order_id: z.string(), line_id: z.number(), amount: z.number() }),
      execute: async ({ amount }) => ({ refund_id: `re_${++refunds}`, amount }),
    }),
  });
  const input = { order_id: 'ai-1', line_id: 1, amount: 30 };
  const model = scriptedModel([
    [toolCall('c1', 'issue_refund', input)],
    [toolCall('c2', 'issue_refund', input)],
    [{ type: 'text', text: 'Refunded.' }],
  ]);
  const res = await generateText({ model, prompt: 'Refund order ai-1 line 1', tools: toolset, stopWhen: stepCountIs(5) });
  assert.equal(res.text, 'Refunded.');
  assert.equal(refunds, 1);
  const results = res.steps.flatMap((s) => s.toolResults).map((r) => r.output);
  assert.deepEqual(results, [{ refund_id: 're_1', amount: 30 }, { refund_id: 're_1', amount: 30 }]);
  const described = model.doGenerateCalls[0].tools.find((t) => t.name === 'issue_refund').description;
  assert.ok(described.startsWith('Refund one order line.') && described.includes(guardedToolGuidance), described);
});

test('the AI SDK loop: an at-most-once tool waits for a person and runs with what was approved', async () => {
  const sent = [];
  const toolset = guardTools(
    fx.approvals,
    {
      send_customer_email: tool({
        description: 'Email a customer.',
        inputSchema: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
        execute: async (p) => {
          sent.push(p);
          return { message_id: 'm-1' };
        },
      }),
    },
    { waitFor: '30s' },
  );
  const model = scriptedModel([
    [toolCall('c1', 'send_customer_email', { customer_id: 'ai-c1', topic: 'welcome', subject: 'Hello' })],
    (prompt) => [{ type: 'text', text: toolOutputs(prompt).map((o) => o.text).join('|') }],
  ]);
  const run = generateText({ model, prompt: 'Welcome ai-c1', tools: toolset, stopWhen: stepCountIs(4) });
  const pending = await pendingAction(fx.server, 'email:ai-c1:welcome');
  await fx.staff.approve(pending.id, 'go');
  const res = await run;
  assert.deepEqual(sent, [{ customer_id: 'ai-c1', topic: 'welcome', subject: 'Hello' }]);
  assert.equal(res.text, JSON.stringify({ message_id: 'm-1' }));
});

test('the AI SDK loop: a rejection reaches the model as the tool error, with the note', async () => {
  let sent = 0;
  const toolset = guardTools(fx.approvals, {
    send_customer_email: tool({
      description: 'Email a customer.',
      inputSchema: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
      execute: async () => ++sent,
    }),
  }, { waitFor: '30s' });
  const model = scriptedModel([
    [toolCall('c1', 'send_customer_email', { customer_id: 'ai-c2', topic: 'promo', subject: 'Sale' })],
    (prompt) => [{ type: 'text', text: toolOutputs(prompt).map((o) => `${o.type}:${o.text}`).join('|') }],
  ]);
  const run = generateText({ model, prompt: 'Promo', tools: toolset, stopWhen: stepCountIs(4) });
  const pending = await pendingAction(fx.server, 'email:ai-c2:promo');
  await fx.staff.reject(pending.id, 'no promotions this week');
  const res = await run;
  assert.equal(sent, 0);
  assert.match(res.text, /^error-text:.*rejected.*no promotions this week/);
});
