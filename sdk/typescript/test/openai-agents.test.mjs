import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, run } from '@openai/agents';
import { z } from 'zod';
import { guardedToolGuidance } from '@approvals/sdk';
import { guardedTool } from '@approvals/sdk/openai-agents';
import { useServer, pendingAction } from './harness.mjs';
import { tools } from './tools.mjs';
import { ScriptedModel, functionCall, functionOutputs, mailer, message } from './scripted-agents-model.mjs';

const fx = useServer(tools);

const refundParams = z.object({ order_id: z.string(), line_id: z.number(), amount: z.number(), reason: z.string() });

test('an Agents SDK run: a guarded exactly-once tool runs once; a repeat replays; a rephrased call is refused', async () => {
  const world = [];
  const refund = guardedTool(fx.approvals, {
    name: 'issue_refund',
    description: 'Refund one order line.',
    parameters: refundParams,
    execute: async (p) => {
      world.push(p);
      return JSON.stringify({ refund_id: `re_${world.length}` });
    },
  });
  const input = { order_id: 'ag-1', line_id: 1, amount: 5, reason: 'duplicate charge' };
  const model = new ScriptedModel([
    [functionCall('c1', 'issue_refund', input)],
    [functionCall('c2', 'issue_refund', input)],
    [functionCall('c3', 'issue_refund', { ...input, reason: 'charged twice, refund it' })],
    (req) => [message(functionOutputs(req).join('\n'))],
  ]);
  const agent = new Agent({ name: 'refunds', instructions: 'Refund.', model, tools: [refund] });
  const result = await run(agent, 'Refund order ag-1 line 1.');
  assert.equal(world.length, 1);
  const [first, second, third] = result.finalOutput.split('\n');
  assert.equal(first, JSON.stringify({ refund_id: 're_1' }));
  assert.equal(second, first, 'the repeat replayed the stored result');
  assert.match(third, /intent_key_reused/);
  const described = model.requests[0].tools.find((t) => t.name === 'issue_refund').description;
  assert.ok(described.includes(guardedToolGuidance));
});

test('an Agents SDK run: an at-most-once tool waits in execute for a person, then runs once', async () => {
  const { agent, world } = mailer(fx.approvals, 'ag-c1', 'welcome', { waitFor: '30s' });
  const running = run(agent, 'Welcome ag-c1.');
  const pending = await pendingAction(fx.server, 'email:ag-c1:welcome');
  await fx.staff.approve(pending.id);
  const result = await running;
  assert.equal(result.finalOutput, 'sent');
  assert.equal(world.length, 1);
});
