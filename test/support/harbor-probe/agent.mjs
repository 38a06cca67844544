#!/usr/bin/env node
/**
 * A custom-harness agent for test/e2e/harbor.test.ts that looks for what a Harbor task hides from
 * it: /tests, /solution, the task's folder on the host (its path is in the prompt), and any file
 * named like the markers the test put in tests/ and solution/. It also plants a reward of 1 in
 * /logs/verifier, which must not count. It writes what it found to probe.json in its working
 * directory (so the test reads it from the sample's diff) and calls no model.
 *
 * Plain JavaScript: it runs inside the sandbox with nothing but node.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const prompt = process.argv[2] ?? '';
const hostDir = /PROBE (\S+)/.exec(prompt)?.[1] ?? '';
const exists = (p) => {
  try {
    fs.statSync(p);
    return true;
  } catch {
    return false;
  }
};
const found = spawnSync(
  '/bin/sh',
  ['-c', "find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -name 'polar-hidden-marker*' -print 2>/dev/null"],
  { encoding: 'utf8', timeout: 120_000 },
)
  .stdout.split('\n')
  .filter(Boolean);
const report = {
  cwd: process.cwd(),
  tests: exists('/tests'),
  solution: exists('/solution'),
  logs: exists('/logs/verifier'),
  hostTaskDir: hostDir !== '' && exists(hostDir),
  hostTests: hostDir !== '' && exists(path.join(hostDir, 'tests')),
  relativeTests: exists('tests') || exists('../tests') || exists('solution'),
  markers: found,
};
fs.mkdirSync('/logs/verifier', { recursive: true });
fs.writeFileSync('/logs/verifier/reward.txt', '1\n');
fs.writeFileSync('/logs/verifier/reward.json', '{"reward": 1}\n');
fs.writeFileSync('probe.json', `${JSON.stringify(report, null, 1)}\n`);
console.log(`PROBE-REPORT ${JSON.stringify(report)}`);
