// dryRun against the real server: POST /api/v1/actions?dry_run=true
// (docs/api.md, "Dry run"). A server without it makes these tests fail
// with DryRunUnsupportedError.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Approvals, InvalidPayloadError } from '@approvals/sdk';
import { startServer } from './harness.mjs';
import { tools } from './tools.mjs';

let server, approvals;
before(async () => {
  server = await startServer(tools);
  approvals = new Approvals({ url: server.url, token: server.token });
});
after(() => server?.stop());

test('dryRun says what a submission would do and writes nothing', async () => {
  const refund = { order_id: 'dry-1', line_id: 1, amount: 3 };
  assert.equal((await approvals.dryRun('issue_refund', refund)).outcome, 'claim');
  assert.equal((await approvals.dryRun('invalidate_cache', { key: 'k' })).outcome, 'record');
  assert.equal((await approvals.dryRun('send_customer_email', { customer_id: 'dry', topic: 't', subject: 's' })).outcome, 'human');
  assert.deepEqual((await approvals.find({ intentKey: 'refund:dry-1:1' })).actions, [], 'nothing was written');
  assert.deepEqual((await approvals.find({ tool: 'invalidate_cache' })).actions, []);
});

test('dryRun of a held intent: replay, in_progress or conflict, with the held action', async () => {
  const email = { customer_id: 'dry-2', topic: 't', subject: 's' };
  const { action: pending } = await approvals.submit('send_customer_email', email);
  let r = await approvals.dryRun('send_customer_email', email);
  assert.equal(r.outcome, 'replay');
  assert.equal(r.action.id, pending.id);
  const refund = { order_id: 'dry-2', line_id: 1, amount: 3 };
  const { action: claim } = await approvals.submit('issue_refund', refund);
  r = await approvals.dryRun('issue_refund', refund);
  assert.equal(r.outcome, 'in_progress');
  assert.equal(r.action.id, claim.id);
  r = await approvals.dryRun('issue_refund', { ...refund, amount: 4 });
  assert.equal(r.outcome, 'conflict');
  assert.equal(r.action.id, claim.id);
});

test('dryRun refuses what a submission refuses', async () => {
  await assert.rejects(approvals.dryRun('issue_refund', { order_id: 'x' }), InvalidPayloadError);
});
