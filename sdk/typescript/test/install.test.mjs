// The README's install commands on a clean copy: `npm pack` (prepare builds
// dist/) and `npm install <tarball>` in an empty project, offline (the
// package has no runtime dependencies and its frameworks are optional
// peers); and `npm install <folder>` of a copy of the checkout without
// dist/. Each installed package is imported from the project, which cannot
// see this checkout, type-checked through its exports, and guards a call
// against the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, cpSync, symlinkSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { startServer } from './harness.mjs';
import { tools } from './tools.mjs';

const sdk = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(join(sdk, 'package.json')).resolve('typescript/bin/tsc');
const npm = (args, cwd) =>
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const CHECK_TS = `
import { Approvals, IntentKeyReusedError, refusalGuidance } from '@approvals/sdk';
import type { Action } from '@approvals/sdk';
import { guardedTool } from '@approvals/sdk/langgraph';
import { guardTools } from '@approvals/sdk/ai';
import { guardedTool as agentsTool } from '@approvals/sdk/openai-agents';
const a: Approvals = new Approvals({ url: 'http://127.0.0.1:1', token: 't' });
const f: (x: Action) => string = (x) => x.intent_key;
export const used = [a, f, IntentKeyReusedError, refusalGuidance.intent_key_reused, guardedTool, guardTools, agentsTool];
`;

const CHECK_MJS = `
import { Approvals, IntentKeyReusedError } from '@approvals/sdk';
import { createRequire } from 'node:module';
const where = createRequire(import.meta.url).resolve('@approvals/sdk');
const approvals = new Approvals({ url: process.env.APPROVALS_URL, token: process.env.APPROVALS_TOKEN });
let calls = 0;
const refund = approvals.guard('issue_refund', async () => ({ refund_id: 're_' + ++calls }));
const order = process.env.ORDER;
const first = await refund({ order_id: order, line_id: 1, amount: 2 });
const again = await refund({ order_id: order, line_id: 1, amount: 2 });
let refused = null;
try { await refund({ order_id: order, line_id: 1, amount: 3 }); } catch (e) { refused = e instanceof IntentKeyReusedError ? e.code : String(e); }
console.log(JSON.stringify({ where, first, again, calls, refused }));
`;

let server, tmp;
before(async () => {
  server = await startServer(tools);
  tmp = mkdtempSync(join(tmpdir(), 'approvals-sdk-install-'));
});
after(async () => {
  await server?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** An empty ESM project in dir. */
function project(dir) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'clean-app', private: true, type: 'module' }));
  return dir;
}

function runChecks(app, order) {
  writeFileSync(join(app, 'check.ts'), CHECK_TS);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ['check.ts'] }),
  );
  // The types resolve through the package's exports (the frameworks' own
  // types are absent in this project: skipLibCheck, as users have it).
  execFileSync(process.execPath, [tsc, '-p', join(app, 'tsconfig.json')], { cwd: app, stdio: 'pipe' });
  writeFileSync(join(app, 'check.mjs'), CHECK_MJS);
  const out = execFileSync(process.execPath, ['check.mjs'], {
    cwd: app,
    encoding: 'utf8',
    env: { ...process.env, APPROVALS_URL: server.url, APPROVALS_TOKEN: server.token, ORDER: order },
  });
  const got = JSON.parse(out);
  assert.ok(got.where.startsWith(app) || !got.where.startsWith(sdk), `imported from ${got.where}`);
  assert.deepEqual(got.first, { refund_id: 're_1' });
  assert.deepEqual(got.again, { refund_id: 're_1' }, 'the same call replays');
  assert.equal(got.calls, 1);
  assert.equal(got.refused, 'intent_key_reused');
  return got;
}

test('npm pack, then npm install <tarball> in an empty project, offline', () => {
  const packs = join(tmp, 'packs');
  mkdirSync(packs);
  // prepare's banner may precede the JSON on stdout.
  const out = npm(['pack', '--json', '--pack-destination', packs], sdk);
  const packed = JSON.parse(out.slice(out.search(/^\[/m)));
  const files = packed[0].files.map((f) => f.path);
  for (const f of ['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/langgraph.js', 'dist/langgraph.d.ts', 'dist/ai.js', 'dist/openai-agents.js']) {
    assert.ok(files.includes(f), `the tarball has ${f}`);
  }
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('node_modules/')), files.join(' '));
  const app = project(join(tmp, 'from-tarball'));
  npm(['install', '--offline', join(packs, packed[0].filename)], app);
  assert.deepEqual(readdirSync(join(app, 'node_modules')).sort(), ['.package-lock.json', '@approvals'], 'no dependency came along');
  const got = runChecks(app, 'TI-tarball');
  assert.ok(got.where.startsWith(join(app, 'node_modules', '@approvals', 'sdk', 'dist')), got.where);
});

test('npm install <folder> of a checkout: prepare builds dist/, or says to run npm ci there first', () => {
  const copy = join(tmp, 'checkout', 'sdk', 'typescript');
  cpSync(sdk, copy, { recursive: true, filter: (src) => !/[/\\](node_modules|dist)$/.test(src) });
  const app = project(join(tmp, 'from-folder'));

  // Before `npm ci` in the folder: no TypeScript there, no dist/: a clear error.
  assert.throws(
    () => npm(['install', '--offline', copy], app),
    (err) => /dist\/ is not built and TypeScript is not installed/.test(String(err.stderr)) && /run `npm ci` in that folder first/.test(String(err.stderr)),
  );
  // After it (its node_modules, as `npm ci` there leaves them): prepare builds dist/.
  symlinkSync(join(sdk, 'node_modules'), join(copy, 'node_modules'), 'dir');
  npm(['install', '--offline', copy], app);
  assert.ok(existsSync(join(copy, 'dist', 'index.js')) && existsSync(join(copy, 'dist', 'index.d.ts')), 'prepare built dist/');
  runChecks(app, 'TI-folder');
});
