import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Evaluation } from './evaluators/types.js';
import type { RolloutTask } from './task-file.js';
import { combinedEvaluation, combineStepMetrics, mergeStepTests, type StepOutcome, stepTask, stopAfter } from './multi-step.js';
import type { HarborStep, HarborTrial } from './harbor/types.js';
import { removeTree } from '../../test/support/remove-tree.js';

const scored = (name: string, rewards: Record<string, number>): StepOutcome => ({
  name,
  evaluation: { reward: rewards.reward ?? 0, traceRewards: null, record: { type: 'harbor', rewards, output: `${name} out` } },
});
const forfeited = (name: string): StepOutcome => ({
  name,
  evaluation: { reward: 0, traceRewards: null, record: { type: 'harbor', forfeit: 'the verifier timed out after 30 s' } } as Evaluation,
});
const step = (over: Partial<HarborStep> = {}): HarborStep => ({
  name: 's',
  instruction: 'do',
  testsDir: null,
  solutionDir: null,
  agentTimeoutSec: null,
  verifierTimeoutSec: 30,
  verifierEnv: {},
  minReward: null,
  workdirDir: null,
  artifacts: [],
  unsupported: [],
  ...over,
});

describe("the steps' rewards (trial/multi_step.py:212-246)", () => {
  it('mean: per metric over the steps run, a metric a step lacks counting 0', () => {
    expect(combineStepMetrics('mean', [scored('a', { reward: 1, style: 0.5 }), scored('b', { reward: 0 })])).toEqual({ reward: 0.5, style: 0.25 });
  });

  it('final: the last step run, verbatim', () => {
    expect(combineStepMetrics('final', [scored('a', { reward: 1 }), scored('b', { reward: 0.25, x: 3 })])).toEqual({ reward: 0.25, x: 3 });
  });

  it('attack: a step whose verifier the agent cut short counts 0, not left out of the mean (Harbor leaves it out)', () => {
    // Harbor's mean over the steps with a result would be 1 here: the agent that passed step a and
    // killed step b's verifier would lose nothing for failing b.
    expect(combineStepMetrics('mean', [scored('a', { reward: 1 }), forfeited('b')])).toEqual({ reward: 0.5 });
    const e = combinedEvaluation({ name: 'o/t', rewardStrategy: 'final' } as HarborTrial, [scored('a', { reward: 1 }), forfeited('b')], null, null);
    expect(e.reward).toBe(0);
    expect(e.record.forfeit).toMatch(/the steps' rewards/);
  });

  it("the sample's evaluation keeps every step's record and chooses its reward as one verifier's would", () => {
    const e = combinedEvaluation({ name: 'o/t' } as HarborTrial, [scored('a', { reward: 1 }), scored('b', { reward: 0 })], null, null);
    expect(e.reward).toBe(0.5);
    expect(e.record).toMatchObject({ multi_step_reward_strategy: 'mean', reward_key: 'reward', rewards: { reward: 0.5 }, output: 'b out' });
    expect((e.record.steps as { name: string; reward: number }[]).map((s) => [s.name, s.reward])).toEqual([
      ['a', 1],
      ['b', 0],
    ]);
  });
});

describe('stopping after a step (multi_step.py:180-210)', () => {
  it('a step without a reward stops the rest', () => {
    expect(stopAfter(step({ name: 'b' }), forfeited('b'))).toMatch(/step b has no reward .*timed out/);
  });

  it('min_reward: a number gates `reward`, a table each metric, a missing metric is -inf', () => {
    expect(stopAfter(step({ minReward: { reward: 1 } }), scored('s', { reward: 1 }))).toBeNull();
    expect(stopAfter(step({ minReward: { reward: 1 } }), scored('s', { reward: 0.5 }))).toMatch(/reward = 0\.5 is below its min_reward 1/);
    expect(stopAfter(step({ minReward: { accuracy: 0.1 } }), scored('s', { reward: 1 }))).toMatch(/accuracy = -Infinity/);
    expect(stopAfter(step(), scored('s', { reward: 0 }))).toBeNull();
  });
});

describe("a step's /tests (verifier.py:150-164)", () => {
  it("tests/ with the step's tests/ over it: the step's test.sh wins, the shared files stay", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-step-tests-'));
    try {
      const shared = path.join(root, 'tests');
      const own = path.join(root, 'steps', 'b', 'tests');
      fs.mkdirSync(shared, { recursive: true });
      fs.mkdirSync(own, { recursive: true });
      fs.writeFileSync(path.join(shared, 'test.sh'), 'shared');
      fs.writeFileSync(path.join(shared, 'lib.sh'), 'lib');
      fs.writeFileSync(path.join(own, 'test.sh'), 'own');
      const trial = { testsDir: shared } as HarborTrial;
      const merged = await mergeStepTests(trial, step({ name: 'b', testsDir: own }), path.join(root, 'scratch'));
      expect(merged.made).toBe(true);
      expect(fs.readFileSync(path.join(merged.dir, 'test.sh'), 'utf8')).toBe('own');
      expect(fs.readFileSync(path.join(merged.dir, 'lib.sh'), 'utf8')).toBe('lib');
      expect(await mergeStepTests(trial, step({ testsDir: null }), path.join(root, 'scratch'))).toEqual({ dir: shared, made: false });
    } finally {
      removeTree(root);
    }
  });
});

describe('the task as one step runs it', () => {
  it("the step's instruction is the prompt; its solution, verifier timeout and env replace the task's; its artifacts join the task's", () => {
    const task = {
      id: 't',
      prompt: 'first',
      workspace: { empty: true },
      setup: [],
      evaluator: { type: 'harbor', timeout: 600 },
      timeout: 60,
      metadata: {},
      harbor: {
        name: 'o/t',
        testsDir: '/t/tests',
        solutionDir: '/t/solution',
        verifierTimeoutSec: 600,
        verifierEnv: { A: '1' },
        artifacts: [{ source: '/app/greet.sh', destination: null, exclude: [] }],
      },
    } as unknown as RolloutTask;
    const s = stepTask(
      task,
      step({
        instruction: 'second',
        solutionDir: '/t/steps/b/solution',
        verifierTimeoutSec: 30,
        verifierEnv: { A: '1', B: '2' },
        agentTimeoutSec: 20,
        artifacts: [{ source: '/app/README.md', destination: null, exclude: [] }],
      }),
      '/merged',
    );
    expect(s.prompt).toBe('second');
    expect(s.timeout).toBe(20);
    expect(s.harbor).toMatchObject({ testsDir: '/merged', solutionDir: '/t/steps/b/solution', verifierTimeoutSec: 30, verifierEnv: { A: '1', B: '2' } });
    // Appended to the task's for the step's collection (config.py:683-688), as hello-multi-step-advanced's document step.
    expect(s.harbor!.artifacts.map((a) => a.source)).toEqual(['/app/greet.sh', '/app/README.md']);
    // The sample's own task is untouched.
    expect(task.prompt).toBe('first');
    expect(task.harbor!.testsDir).toBe('/t/tests');
  });
});
