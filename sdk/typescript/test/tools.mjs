// The tools file of the SDK tests, shared with the Python SDK's.
import { readFileSync } from 'node:fs';

export const tools = readFileSync(new URL('../../testdata/tools.yaml', import.meta.url), 'utf8');
