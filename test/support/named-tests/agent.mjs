#!/usr/bin/env node
/**
 * A custom-harness agent standing for a policy's shell tool, with no model behind it: the prompt's
 * first line is `RUN <base64 bash>`, which it runs in its workspace (the sandbox's) and ends.
 * Plain JavaScript: it runs inside the sandbox with nothing but node and bash.
 */
import { spawnSync } from 'node:child_process';

const [verb = '', payload = ''] = (process.argv[2] ?? '').split('\n')[0].trim().split(/\s+/);
if (verb !== 'RUN') {
  process.stderr.write(`agent: no RUN line in the prompt\n`);
  process.exit(2);
}
const r = spawnSync('bash', ['-c', Buffer.from(payload, 'base64').toString('utf8')], { stdio: 'inherit' });
process.exit(r.status ?? 1);
