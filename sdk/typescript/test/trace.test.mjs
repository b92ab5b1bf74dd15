// The SDK sends the caller's trace context (W3C traceparent, tracestate) with
// each request: from the traceContext option, else from OpenTelemetry's
// active context when @opentelemetry/api is installed. A plain HTTP server
// stands in for approvals and keeps the headers of what the SDK sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { context, propagation, trace, ROOT_CONTEXT, TraceFlags } from '@opentelemetry/api';
import { W3CTraceContextPropagator, TraceState } from '@opentelemetry/core';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Approvals } from '@approvals/sdk';

const seen = [];
const server = http.createServer((req, res) => {
  seen.push({ path: req.url, headers: req.headers });
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ tools: [], guidance: '' }));
});
let url;
before(async () => {
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((r) => server.close(r)));

const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

test('the traceContext option: each request carries its traceparent and tracestate', async () => {
  let n = 0;
  const approvals = new Approvals({ url, token: 't', traceContext: () => (n++ === 0 ? { traceparent, tracestate: 'vendor=abc' } : undefined) });
  await approvals.tools();
  await approvals.tools();
  const [first, second] = seen.splice(0);
  assert.equal(first.headers.traceparent, traceparent);
  assert.equal(first.headers.tracestate, 'vendor=abc');
  assert.equal(second.headers.traceparent, undefined);
  assert.equal(second.headers.tracestate, undefined);
});

test('with @opentelemetry/api: the active span context, injected by the registered propagator', async () => {
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  try {
    const approvals = new Approvals({ url, token: 't' });
    await approvals.tools(); // no active span: nothing to send
    const spanContext = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
      traceState: new TraceState('congo=t61rcWkgMzE'),
    };
    await context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), () => approvals.tools());
    const [none, active] = seen.splice(0);
    assert.equal(none.headers.traceparent, undefined);
    assert.equal(active.headers.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    assert.equal(active.headers.tracestate, 'congo=t61rcWkgMzE');
  } finally {
    propagation.disable();
    context.disable();
  }
});
