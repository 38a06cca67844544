import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFixtureCheckout } from '../support/nemo-rl-checkout.js';
import { writeGpuStandIns } from '../support/fake-nemo-rl/stand-ins.js';

/**
 * `polar train grpo` against the stand-in NeMo-RL (test/support/fake-nemo-rl) when every sample
 * fails outside the policy (here: a setup that cannot succeed). NeMo-RL would otherwise train on
 * masked placeholders with reward 0 and say so only in a metric; the agent stops it instead, with a
 * non-2xx /run answer that NeMo-RL prints ("EXCEPTION RESULT", nemo_gym.py:697-710) and raises on.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
let dir: string;
let checkout: string;
let fakeBin: string;
let tasks: string;
let agent: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-train-failures-'));
  checkout = writeFixtureCheckout(path.join(dir, 'RL'));
  fakeBin = writeGpuStandIns(dir);
  agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(
    agent,
    `const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: process.argv[2] }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();
(await import('node:fs')).writeFileSync('answer.txt', '1\\n');`,
  );
  tasks = path.join(dir, 'tasks.jsonl');
  // A data folder that is not there: every sample's setup fails, every time.
  fs.writeFileSync(
    tasks,
    ['a', 'b']
      .map((id) =>
        JSON.stringify({
          id,
          prompt: 'answer with 1',
          workspace: { empty: true },
          setup: [`cp -r ${path.join(dir, 'no-such-data')} .`],
          evaluator: { type: 'command', command: 'cat answer.txt' },
          timeout: 60,
        }),
      )
      .join('\n'),
  );
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('polar train grpo when every sample fails outside the policy', () => {
  it('the agent retries, then stops NeMo-RL at the first step with what to fix, instead of training on masks', { timeout: 180_000 }, async () => {
    const runDir = path.join(dir, 'run');
    const args = [
      BIN,
      'train',
      'grpo',
      '--nemo-rl',
      checkout,
      '--model',
      'Qwen/Qwen3-0.6B',
      '--tasks',
      tasks,
      '--harness',
      'custom',
      '--command',
      `${process.execPath} ${agent} {prompt}`,
      '--sandbox',
      'none',
      '--prompts-per-step',
      '2',
      '--group-size',
      '2',
      '--steps',
      '2',
      '--infra-retries',
      '1',
      '--run-dir',
      runDir,
      '--db',
      path.join(runDir, 'polar.db'),
      '--json',
    ];
    const env = { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state'), PATH: `${fakeBin}${path.delimiter}${process.env.PATH}` };
    const outcome = await run(process.execPath, args, { env, timeout: 150_000 }).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
    );
    expect(outcome.code).toBe(1);
    const result = JSON.parse(outcome.stdout) as { ok: boolean; steps: number };
    expect(result).toMatchObject({ ok: false, steps: 0 });
    const log = fs.readFileSync(path.join(runDir, 'train.log'), 'utf8');
    // The agent's answer, as NeMo-RL prints it before raising.
    expect(log).toMatch(/EXCEPTION RESULT .*POLAR_TOO_MANY_FAILURES/);
    expect(log).toMatch(
      /4 of the last 4 rows failed for reasons outside the policy \(more than --max-failed-share 0\.5\).*Fix the setup.*4× the workspace or its setup failed: .*no-such-data/,
    );
    // Each row was tried twice (--infra-retries 1) before it counted.
    expect(log.match(/attempt 1 of 2 failed/g)?.length).toBe(4);
    expect(log).toContain('/run answered 400');
  });
});
