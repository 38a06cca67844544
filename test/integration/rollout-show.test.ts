import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';

/**
 * `polar rollout show` for a sample whose harness failed without saying why to polar: the harness
 * exits 1 after printing its reason to stderr, so the sample ends `failed` with no error of its own,
 * and the reason is only in `.polar/runs/<session>/harness.log`. show fills the error column from it.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);

/** One model call through polar, then the reason on stderr (after a line of chatter) and exit 1. */
const FAILING = `
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'hi' }] }),
});
await res.json();
console.log('agent: starting work');
console.error('fatal: could not open the workspace config (missing credentials)');
console.error('');
process.exit(1);
`;

let upstream: ReferenceUpstream;
let dir: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-rollout-show-'));
});
afterAll(async () => {
  await upstream?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function polar(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, timeout: 120_000 });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('polar rollout show', () => {
  it("fills a failed sample's error column from the last meaningful line of its harness log, in the table and in --json", async () => {
    const agent = path.join(dir, 'failing.mjs');
    fs.writeFileSync(agent, FAILING);
    const tasks = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(tasks, `${JSON.stringify({ id: 'broken', prompt: 'go', workspace: { empty: true }, evaluator: { type: 'session-completed' } })}\n`);
    const db = path.join(dir, 'show.db');
    const r = await polar([
      'rollout',
      '--tasks',
      tasks,
      '--harness',
      'custom',
      '--command',
      `${process.execPath} ${agent}`,
      '--upstream',
      upstream.url,
      '--samples',
      '1',
      '--db',
      db,
      '--sandbox',
      'none',
      '--out',
      path.join(dir, 'out'),
      '--json',
    ]);
    const summary = JSON.parse(r.stdout);
    expect(summary.outcomes, r.stderr).toMatchObject({ failed: 1 });

    const json = JSON.parse((await polar(['rollout', 'show', summary.rolloutId, '--db', db, '--json'])).stdout);
    const [sample] = json.samples;
    expect(sample).toMatchObject({ status: 'failed', error: null });
    expect(sample.harnessLog.tail).toEqual(['fatal: could not open the workspace config (missing credentials)']);
    expect(sample.harnessLog.file).toBe(path.join(dir, '.polar', 'runs', sample.sessionId, 'harness.log'));

    const text = await polar(['rollout', 'show', summary.rolloutId, '--db', db]);
    expect(text.code, text.stderr).toBe(0);
    const row = text.stdout.split('\n').find((l) => l.includes(sample.sessionId));
    expect(row).toMatch(/failed .* harness\.log: fatal: could not open the workspace config \(missing credentials\)$/);
  }, 120_000);
});
