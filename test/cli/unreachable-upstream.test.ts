import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { startPolarServer } from '../e2e/support.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 40: `polar run --upstream http://127.0.0.1:9/v1` said to pass --model, and with --model the
 * harness retried 502s until its own timeout (147 s for Claude Code). Every command that starts a
 * harness now asks the upstream once first and stops at once with the cause, model named or not.
 * Port 9 (discard) refuses connections here. (`polar worker`: test/integration/postgres.test.ts.)
 */
const DEAD = 'http://127.0.0.1:9/v1';
const CAUSE =
  /error\[POLAR_UPSTREAM_CONNECT\]: cannot reach http:\/\/127\.0\.0\.1:9\/v1 \(ECONNREFUSED\): start the inference server there or correct --upstream/;
let dir: string;
const children: ChildProcess[] = [];

const polar = (args: string[]) => polarCli(args, { timeout: patient(60_000) });

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-unreachable-'));
  fs.writeFileSync(
    path.join(dir, 'tasks.jsonl'),
    `${JSON.stringify({ id: 't', prompt: 'p', workspace: { empty: true }, evaluator: { type: 'command', command: 'echo 1' } })}\n`,
  );
});
afterAll(() => {
  for (const c of children) c.kill('SIGTERM');
  removeTree(dir);
});

describe('an upstream nobody answers at', () => {
  it('polar serve: stops before it listens, with the cause (it opens each harness only when its first task comes)', { timeout: patient(60_000) }, async () => {
    const db = path.join(dir, 'serve.db');
    const r = await polar(['serve', '--upstream', DEAD, '--port', '0', '--db', db]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(CAUSE);
    expect(r.stdout).not.toMatch(/polar serve on/);
    expect(fs.existsSync(db)).toBe(false);
  });

  for (const model of [[], ['--model', 'm']]) {
    const named = model.length > 0 ? 'with --model' : 'without --model';

    it(`polar run ${named}: stops before the harness starts, with the cause`, { timeout: patient(60_000) }, async () => {
      const db = path.join(dir, `run-${model.length}.db`);
      // The custom harness would exit 0 at once: only the check can fail this run.
      const r = await polar(['run', '--harness', 'custom', '--command', 'true', '--upstream', DEAD, ...model, '--db', db, '--cwd', dir, '--sandbox', 'none']);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(CAUSE);
      expect(r.stderr).not.toMatch(/pass --model/);
      const store = Store.open(db, { readonly: true });
      try {
        expect(store.sessions.list()).toEqual([]);
      } finally {
        store.close();
      }
    });

    it(`polar rollout ${named}: refused at start, with the cause`, { timeout: patient(60_000) }, async () => {
      const r = await polar([
        'rollout',
        '--tasks',
        path.join(dir, 'tasks.jsonl'),
        '--harness',
        'custom',
        '--command',
        'true',
        '--upstream',
        DEAD,
        ...model,
        '--db',
        path.join(dir, `rollout-${model.length}.db`),
        '--out',
        path.join(dir, `out-${model.length}`),
        '--samples',
        '1',
        '--sandbox',
        'none',
      ]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(CAUSE);
    });
  }

  it('polar gym-agent: a row whose policy server cannot be reached is answered at once with the cause, row after row', {
    timeout: patient(120_000),
  }, async () => {
    const { json } = await startPolarServer(
      [
        'gym-agent',
        '--harness',
        'custom',
        '--command',
        'true',
        '--upstream',
        DEAD,
        '--model',
        'm',
        '--context-window',
        '4096',
        '--sandbox',
        'none',
        '--db',
        path.join(dir, 'gym.db'),
        '--tasks',
        path.join(dir, 'tasks.jsonl'),
        '--out',
        path.join(dir, 'out-gym'),
        '--json',
      ],
      children,
    );
    const row = {
      responses_create_params: { input: [{ role: 'user', content: 'p' }], temperature: 1, top_p: 1 },
      agent_ref: { type: 'responses_api_agents', name: 'polar_agent' },
      task_id: 't',
    };
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${json.url as string}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(row) });
      const text = await res.text();
      expect(text).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9\/v1 \(ECONNREFUSED\)/);
    }
  });
});
