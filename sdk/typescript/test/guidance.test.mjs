// The refusal guidance is the server's words: the SDK's table is the one in
// sdk/testdata/refusal-guidance.json (written by the server's test from its
// one source, problem/guidance.go), and a real refusal's REST problem
// carries the same sentence, naming the REST reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { refusalGuidance, IntentKeyReusedError, OutcomeConflictError } from '@approvals/sdk';
import { useServer } from './harness.mjs';
import { tools } from './tools.mjs';

const server = JSON.parse(readFileSync(new URL('../../testdata/refusal-guidance.json', import.meta.url), 'utf8'));
const fx = useServer(tools);

test("the SDK's guidance is the server's, code by code", () => {
  assert.deepEqual(Object.keys(refusalGuidance).sort(), Object.keys(server).sort());
  for (const [code, faces] of Object.entries(server)) assert.equal(refusalGuidance[code], faces.sdk, code);
});

test('a real refusal carries the guidance on REST and in the SDK error', async () => {
  const payload = { order_id: 'GD-1', line_id: 1, amount: 2 };
  const { action } = await fx.approvals.submit('issue_refund', payload);
  await assert.rejects(fx.approvals.submit('issue_refund', { ...payload, amount: 3 }), (e) => {
    assert.ok(e instanceof IntentKeyReusedError);
    assert.equal(e.problem.guidance, server.intent_key_reused.rest);
    assert.equal(e.guidance, server.intent_key_reused.sdk);
    assert.ok(e.message.endsWith(server.intent_key_reused.sdk), e.message);
    assert.doesNotMatch(e.detail, /nothing was done/i);
    return true;
  });
  await fx.approvals.complete(action.id, { refund_id: 're_1' });
  await assert.rejects(fx.approvals.fail(action.id, 'declined'), (e) => {
    assert.ok(e instanceof OutcomeConflictError, String(e));
    assert.equal(e.problem.guidance, server.outcome_conflict.rest);
    return true;
  });
});
