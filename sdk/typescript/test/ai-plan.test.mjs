// The Vercel AI SDK example of a plan (docs/sdk.md, "Plans"): the model
// proposes a plan through a propose_plan tool, a person approves it once
// on the dashboard, and the model's calls of the steps run once each as
// steps of that plan; a call that differs from the plan reaches the model
// as a not_in_plan error. The real AI SDK loop with its own test model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { guardTools } from '@approvals/sdk/ai';
import { useServer, pendingPlan, rest } from './harness.mjs';
import { tools } from './tools.mjs';
import { scriptedModel, toolCall, toolOutputs } from './scripted-ai-model.mjs';

const fx = useServer(tools);

test('the AI SDK loop with a plan: one approval, three steps performed once, a differing call refused', async () => {
  const world = { refunds: [], emails: [], cache: [] };
  let plan; // the approved plan, once the person approved it
  const stepSchema = z.object({ tool: z.string(), payload: z.record(z.string(), z.unknown()), intent_key: z.string().optional() });
  const toolset = {
    propose_plan: tool({
      description: 'Propose every call of a piece of work at once; a person approves the whole plan.',
      inputSchema: z.object({ title: z.string(), steps: z.array(stepSchema) }),
      execute: async ({ title, steps }) => {
        plan = await fx.approvals.plan(steps.map((s) => ({ tool: s.tool, payload: s.payload, intentKey: s.intent_key })), { title, waitFor: '30s' });
        return { plan_id: plan.id, state: plan.plan.state };
      },
    }),
    ...guardTools(
      fx.approvals,
      {
        issue_refund: tool({
          description: 'Refund one order line.',
          inputSchema: z.object({ order_id: z.string(), line_id: z.number(), amount: z.number() }),
          execute: async (p) => (world.refunds.push(p), { refund_id: `re_${world.refunds.length}` }),
        }),
        send_customer_email: tool({
          description: 'Email a customer.',
          inputSchema: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
          execute: async (p) => (world.emails.push(p), { message_id: `m_${world.emails.length}` }),
        }),
        invalidate_cache: tool({
          description: 'Drop a cached key.',
          inputSchema: z.object({ key: z.string() }),
          execute: async (p) => (world.cache.push(p), 'invalidated'),
        }),
      },
      { plan: () => plan, intentKeys: { invalidate_cache: (p) => `cache:${p.key}` } },
    ),
  };

  const refund = { order_id: 'ai-p1', line_id: 2, amount: 12.5 };
  const email = { customer_id: 'c-ai-p1', topic: 'refund', subject: 'Your refund is on its way' };
  const cache = { key: 'orders/ai-p1' };
  const title = 'Refund ai-p1 line 2, tell the customer, drop the cache';
  const model = scriptedModel([
    [toolCall('p1', 'propose_plan', { title, steps: [
      { tool: 'issue_refund', payload: refund },
      { tool: 'send_customer_email', payload: email },
      { tool: 'invalidate_cache', payload: cache, intent_key: 'cache:orders/ai-p1' },
    ] })],
    // The model rewords the email: not what was approved.
    [toolCall('s0', 'send_customer_email', { ...email, subject: 'Refund + 10% coupon' })],
    [toolCall('s1', 'issue_refund', refund), toolCall('s2', 'send_customer_email', email), toolCall('s3', 'invalidate_cache', cache)],
    (prompt) => [{ type: 'text', text: JSON.stringify(toolOutputs(prompt).map((o) => `${o.toolCallId}:${o.type}:${o.text}`)) }],
  ]);
  const run = generateText({ model, prompt: 'Refund the duplicate charge on ai-p1 line 2.', tools: toolset, stopWhen: stepCountIs(6) });
  const pending = await pendingPlan(fx.server, title);
  await fx.staff.decidePlan(pending.id, 'approve', 'go ahead');
  const res = await run;

  const outputs = JSON.parse(res.text);
  assert.equal(outputs[0], `p1:json:${JSON.stringify({ plan_id: pending.id, state: 'approved' })}`);
  assert.match(outputs[1], /^s0:error-text:.*not_in_plan.*subject/);
  assert.deepEqual(outputs.slice(2), [
    `s1:json:${JSON.stringify({ refund_id: 're_1' })}`,
    `s2:json:${JSON.stringify({ message_id: 'm_1' })}`,
    's3:text:invalidated',
  ]);
  assert.deepEqual(world, { refunds: [refund], emails: [email], cache: [cache] });
  const after = await rest(fx.server, `/api/v1/plans/${pending.id}`);
  assert.equal(after.state, 'done');
  assert.deepEqual(after.approvals.map((a) => a.by), ['user:ann@example.com']);
});
