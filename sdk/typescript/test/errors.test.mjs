// The mapping of problem answers to typed errors, and the advice each
// refusal an agent can meet carries (issue 43: every refusal says what
// happened and what to do next). No server: some codes (intent_under_review,
// not_in_plan, step_not_ready) are documented (docs/api.md) before the server sends them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ApprovalsError,
  InProgressError,
  IntentKeyReusedError,
  IntentUnderReviewError,
  NotInPlanError,
  OutcomeConflictError,
  StepNotReadyError,
  problemError,
  refusalGuidance,
} from '@approvals/sdk';

const action = { id: 'a1', intent_key: 'refund:o1:1', state: 'done' };

test('each refusal code an agent can meet is its own typed error, with advice in its message', () => {
  const cases = [
    ['intent_key_reused', 422, IntentKeyReusedError, /do not call again with other arguments/],
    ['in_progress', 409, InProgressError, /do not perform the effect and do not call again/],
    ['intent_under_review', 409, IntentUnderReviewError, /do not call again for this intent until the ticket is resolved/],
    ['outcome_conflict', 409, OutcomeConflictError, /do not report again/],
    ['not_in_plan', 422, NotInPlanError, /exactly as the plan was approved/],
    ['step_not_ready', 409, StepNotReadyError, /perform the earlier steps first/],
  ];
  for (const [code, status, Class, advice] of cases) {
    const e = problemError({ status, code, detail: `refused (${code})`, action });
    assert.ok(e instanceof Class, `${code} -> ${e.constructor.name}`);
    assert.ok(e instanceof ApprovalsError);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    assert.equal(e.action, action);
    assert.equal(e.guidance, refusalGuidance[code]);
    assert.match(e.guidance, advice);
    assert.ok(e.message.includes(`refused (${code})`) && e.message.endsWith(e.guidance), e.message);
    // "Nothing was done" alone reads to a model as "the effect did not happen".
    assert.doesNotMatch(e.guidance, /nothing was done/i);
  }
});

test('intent_key_reused says the held action may have taken effect', () => {
  assert.match(refusalGuidance.intent_key_reused, /may have happened/);
  assert.match(refusalGuidance.intent_key_reused, /find with its intent key/);
});

test('other codes carry no advice; an unknown code is a plain ApprovalsError', () => {
  const e = problemError({ status: 404, code: 'not_found', detail: 'no action a9' });
  assert.equal(e.guidance, '');
  assert.equal(e.message, 'approvals: not_found (404): no action a9');
  const u = problemError({ status: 409, code: 'something_new', detail: 'x' });
  assert.equal(u.constructor, ApprovalsError);
});

// The same words in both SDKs: the Python SDK's table, read by its own interpreter.
test('the Python SDK gives the same advice for every refusal', async (t) => {
  const { execFileSync } = await import('node:child_process');
  let out;
  try {
    out = execFileSync('python3', ['-c', 'import json, approvals; print(json.dumps(approvals.REFUSAL_GUIDANCE))'], {
      cwd: new URL('../../python/', import.meta.url),
      encoding: 'utf8',
    });
  } catch (e) {
    if (e.code === 'ENOENT') return t.skip('python3 is not installed');
    throw e;
  }
  assert.deepEqual(JSON.parse(out), { ...refusalGuidance });
});
