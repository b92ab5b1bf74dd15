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

// Issue 43, item 4: the framework's timeoutMs passes through; on the
// timeout the model reads guidance, not a bare "timed out", and the guarded
// call still finishes once and is reported.
test('an Agents SDK run: timeoutMs passes through; the model reads guidance and the effect still happens once', async () => {
  const world = [];
  const refund = guardedTool(fx.approvals, {
    name: 'issue_refund',
    description: 'Refund one order line.',
    parameters: refundParams,
    timeoutMs: 300,
    execute: async (p) => {
      await new Promise((r) => setTimeout(r, 1_000));
      world.push(p);
      return JSON.stringify({ refund_id: `re_${world.length}` });
    },
  });
  const input = { order_id: 'ag-t1', line_id: 1, amount: 5, reason: 'duplicate charge' };
  const model = new ScriptedModel([[functionCall('c1', 'issue_refund', input)], (req) => [message(functionOutputs(req).join('\n'))]]);
  const agent = new Agent({ name: 'refunds', instructions: 'Refund.', model, tools: [refund] });
  const started = Date.now();
  const result = await run(agent, 'Refund order ag-t1 line 1.');
  assert.ok(Date.now() - started < 1_000, 'the run did not wait for the effect');
  assert.match(result.finalOutput, /did not answer within 300 ms/);
  assert.match(result.finalOutput, /Do not call it again with other arguments/);
  assert.equal(world.length, 0, 'not yet');
  const deadline = Date.now() + 10_000;
  let a;
  do {
    await new Promise((r) => setTimeout(r, 100));
    [a] = (await fx.approvals.find({ intentKey: 'refund:ag-t1:1' })).actions;
  } while (a.state !== 'done' && Date.now() < deadline);
  assert.equal(a.state, 'done', 'the guarded call finished and was reported');
  assert.equal(world.length, 1);
});
