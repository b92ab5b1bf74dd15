// npm's prepare (run by `npm ci` here, `npm pack`, and `npm install
// ./sdk/typescript` from another project): builds dist/ with TypeScript.
// Where TypeScript is not installed (the folder was installed before
// `npm ci` ran in it) it says what to do instead of failing on "tsc: not found".
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let tsc;
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  if (existsSync(join(root, 'dist', 'index.js'))) process.exit(0);
  console.error(
    '@approvals/sdk: dist/ is not built and TypeScript is not installed in ' +
      root +
      ': run `npm ci` in that folder first (it installs TypeScript and builds dist/), then install it again.',
  );
  process.exit(1);
}
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });
