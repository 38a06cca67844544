import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTrainBench, trainEnv, trainGrpoArgs, writeAnswerOneTasks, writeOneCallAgent } from '../support/nemo-rl-train.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar train grpo` against the stand-in NeMo-RL (test/support/fake-nemo-rl) when every sample
 * fails outside the policy (here: a setup that cannot succeed). NeMo-RL would otherwise train on
 * masked placeholders with reward 0 and say so only in a metric; the agent stops it instead, with a
 * non-2xx /run answer that NeMo-RL prints ("EXCEPTION RESULT", nemo_gym.py:697-710) and raises on.
 */
let dir: string;
let checkout: string;
let fakeBin: string;
let tasks: string;
let agent: string;

beforeAll(() => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-train-failures-'));
  agent = writeOneCallAgent(path.join(dir, 'agent.mjs'), "'1\\n'");
  // A data folder that is not there: every sample's setup fails, every time.
  tasks = writeAnswerOneTasks(path.join(dir, 'tasks.jsonl'), { setup: [`cp -r ${path.join(dir, 'no-such-data')} .`] });
});
afterAll(() => removeTree(dir));

describe('polar train grpo when every sample fails outside the policy', () => {
  it('the agent retries, then stops NeMo-RL at the first step with what to fix, instead of training on masks', { timeout: patient(180_000) }, async () => {
    const runDir = path.join(dir, 'run');
    const args = trainGrpoArgs({
      checkout,
      model: 'Qwen/Qwen3-0.6B',
      tasks,
      harness: nodeAgentHarness(agent),
      runDir,
      db: path.join(runDir, 'polar.db'),
      extra: ['--steps', '2', '--infra-retries', '1', '--json'],
    });
    const env = trainEnv(fakeBin, { POLAR_STATE_DIR: path.join(dir, 'state') });
    const outcome = await polarCli(args, { env, timeout: patient(150_000) });
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
