// needsApproval answered from a dry run. Needs the server's dry run (POST
// /api/v1/actions?dry_run=true, docs/api.md, "Dry run"); a server without
// it makes these tests fail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, run } from '@openai/agents';
import { z } from 'zod';
import { guardedTool, resolveApprovals } from '@approvals/sdk/openai-agents';
import { useServer, pendingAction } from './harness.mjs';
import { tools } from './tools.mjs';
import { ScriptedModel, functionCall, functionOutputs, mailer, message } from './scripted-agents-model.mjs';

const fx = useServer(tools);

test('an at-most-once call interrupts the run; resolveApprovals answers it from the approvals decision', async () => {
  const { agent, world } = mailer(fx.approvals, 'dr-c1', 'welcome', { needsApproval: 'dry-run' });
  let result = await run(agent, 'Welcome dr-c1.');
  assert.equal(result.interruptions.length, 1, 'the run waits for a person');
  assert.equal(world.length, 0);
  const resolving = resolveApprovals(result, { waitFor: '30s' });
  const pending = await pendingAction(fx.server, 'email:dr-c1:welcome');
  await fx.staff.approve(pending.id);
  assert.deepEqual(await resolving, { approved: 1, rejected: 0, pending: 0 });
  result = await run(agent, result.state);
  assert.equal(result.finalOutput, 'sent');
  assert.equal(world.length, 1);
});

test('an exactly-once call needs no person: the dry run says claim, and the run goes on', async () => {
  let refunds = 0;
  const refund = guardedTool(fx.approvals, {
    name: 'issue_refund',
    description: 'Refund one order line.',
    parameters: z.object({ order_id: z.string(), line_id: z.number(), amount: z.number() }),
    needsApproval: 'dry-run',
    execute: async () => `re_${++refunds}`,
  });
  const model = new ScriptedModel([
    [functionCall('c1', 'issue_refund', { order_id: 'dr-1', line_id: 1, amount: 2 })],
    (req) => [message(functionOutputs(req).join('\n'))],
  ]);
  const result = await run(new Agent({ name: 'refunds', instructions: 'Refund.', model, tools: [refund] }), 'Refund dr-1.');
  assert.equal(result.interruptions?.length ?? 0, 0);
  assert.equal(result.finalOutput, 're_1');
});

test('a rejection answers the interruption with the note', async () => {
  const { agent, world } = mailer(fx.approvals, 'dr-c2', 'promo', { needsApproval: 'dry-run' });
  let result = await run(agent, 'Promo.');
  const resolving = resolveApprovals(result, { waitFor: '30s' });
  await fx.staff.reject((await pendingAction(fx.server, 'email:dr-c2:promo')).id, 'not now');
  assert.deepEqual(await resolving, { approved: 0, rejected: 1, pending: 0 });
  result = await run(agent, result.state);
  assert.match(result.finalOutput, /rejected.*not now/);
  assert.equal(world.length, 0);
});
