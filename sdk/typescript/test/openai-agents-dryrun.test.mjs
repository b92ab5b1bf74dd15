// needsApproval answered from a dry run. Needs the server's dry run (POST
// /api/v1/actions?dry_run=true, contract section 14), which arrives with
// the policies work; until then these tests fail.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, run } from '@openai/agents';
import { z } from 'zod';
import { Approvals } from '@approvals/sdk';
import { guardedTool, resolveApprovals } from '@approvals/sdk/openai-agents';
import { startServer, Staff, pendingAction } from './harness.mjs';
import { tools } from './tools.mjs';
import { ScriptedModel, functionCall, functionOutputs, message } from './scripted-agents-model.mjs';

let server, staff, approvals;
before(async () => {
  server = await startServer(tools);
  staff = await new Staff(server.url).login();
  approvals = new Approvals({ url: server.url, token: server.token });
});
after(() => server?.stop());

test('an at-most-once call interrupts the run; resolveApprovals answers it from the approvals decision', async () => {
  const world = [];
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Email a customer.',
    parameters: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
    needsApproval: 'dry-run',
    execute: async (p) => {
      world.push(p);
      return 'sent';
    },
  });
  const model = new ScriptedModel([
    [functionCall('c1', 'send_customer_email', { customer_id: 'dr-c1', topic: 'welcome', subject: 'Hi' })],
    (req) => [message(functionOutputs(req).join('\n'))],
  ]);
  const agent = new Agent({ name: 'mailer', instructions: 'Mail.', model, tools: [email] });
  let result = await run(agent, 'Welcome dr-c1.');
  assert.equal(result.interruptions.length, 1, 'the run waits for a person');
  assert.equal(world.length, 0);
  const resolving = resolveApprovals(result, { waitFor: '30s' });
  const pending = await pendingAction(server, 'email:dr-c1:welcome');
  await staff.approve(pending.id);
  assert.deepEqual(await resolving, { approved: 1, rejected: 0, pending: 0 });
  result = await run(agent, result.state);
  assert.equal(result.finalOutput, 'sent');
  assert.equal(world.length, 1);
});

test('an exactly-once call needs no person: the dry run says claim, and the run goes on', async () => {
  let refunds = 0;
  const refund = guardedTool(approvals, {
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
  let sent = 0;
  const email = guardedTool(approvals, {
    name: 'send_customer_email',
    description: 'Email a customer.',
    parameters: z.object({ customer_id: z.string(), topic: z.string(), subject: z.string() }),
    needsApproval: 'dry-run',
    execute: async () => String(++sent),
  });
  const model = new ScriptedModel([
    [functionCall('c1', 'send_customer_email', { customer_id: 'dr-c2', topic: 'promo', subject: 'Sale' })],
    (req) => [message(functionOutputs(req).join('\n'))],
  ]);
  const agent = new Agent({ name: 'mailer', instructions: 'Mail.', model, tools: [email] });
  let result = await run(agent, 'Promo.');
  const resolving = resolveApprovals(result, { waitFor: '30s' });
  await staff.reject((await pendingAction(server, 'email:dr-c2:promo')).id, 'not now');
  assert.deepEqual(await resolving, { approved: 0, rejected: 1, pending: 0 });
  result = await run(agent, result.state);
  assert.match(result.finalOutput, /rejected.*not now/);
  assert.equal(sent, 0);
});
