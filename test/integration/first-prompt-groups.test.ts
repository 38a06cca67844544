import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepAdvantages, TensorboardScalars } from '../../src/train/tensorboard.js';
import { agentRolloutArgs } from '../support/agent-rollout.js';
import { makeTrainBench, trainEnv, trainGrpoArgs, writeTaskFile } from '../support/nemo-rl-train.js';
import { nodeAgentHarness, POLAR_BIN, polarCli } from '../support/polar-cli.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 30: NeMo-RL groups GRPO samples by the token ids of each sample's first prompt, so a group
 * only trains when its samples share one. A group of 4 with mixed rewards through `polar train grpo`
 * (the gym agent, NeMo-RL's stand-in computing advantages by NeMo-RL's rule) gets non-zero
 * advantages; an agent whose first request carries something of its own run splits every group, which `polar rollout` and `polar gym-agent` say loudly, and the stand-in's
 * advantages are all 0, which `polar train` says loudly too.
 */
const run = promisify(execFile);
let dir: string;
let upstream: ReferenceUpstream;
let checkout: string;
let fakeBin: string;
let tasks: string;
const TASK_PROMPT = 'answer with 0 or 1';

/**
 * One tool-bearing model call, then answer.txt holds 0 or 1 by turns (each run claims the next free
 * slot file, so a group of 4 gets rewards 0, 1, 0, 1 in some order). `split`: on the task's own
 * prompt the first request also carries its run number, so no two samples share a first prompt,
 * while the runs of `polar train`'s first-prompt preflight (train/first-prompt-probe.ts, its own
 * prompt) agree: a render that differs only on real tasks or only later (a date past midnight, a
 * counter) is what the preflight cannot see and the live check does.
 */
function groupAgent(name: string, split: boolean): string {
  const slots = path.join(dir, `${name}-slots`);
  fs.mkdirSync(slots);
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(
    file,
    `const fs = await import('node:fs');
let n = 0;
for (;; n++) { try { fs.writeFileSync(${JSON.stringify(slots)} + '/slot-' + n, '', { flag: 'wx' }); break; } catch {} }
const content = process.argv[2] + (${split} && process.argv[2] === ${JSON.stringify(TASK_PROMPT)} ? ' (run ' + n + ')' : '');
const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();
fs.writeFileSync('answer.txt', (n % 2) + '\\n');`,
  );
  return file;
}

beforeAll(async () => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-first-prompts-'));
  upstream = await startReferenceUpstream();
  tasks = writeTaskFile(path.join(dir, 'tasks.jsonl'), [
    { id: 't', prompt: TASK_PROMPT, workspace: { empty: true }, evaluator: { type: 'command', command: 'cat answer.txt' }, timeout: patientSeconds(60) },
  ]);
});
afterAll(async () => {
  await upstream?.close();
  removeTree(dir);
});

async function rollout(agent: string, db: string, json: boolean) {
  return polarCli(agentRolloutArgs({ tasks, agent, upstream: upstream.url, db, dir }, ['--samples', '4', ...(json ? ['--json'] : [])]), {
    env: { ...process.env, NO_COLOR: '1' },
  });
}

describe('polar rollout: do the samples of a group share one first prompt?', () => {
  it(
    'one first prompt for the group: checked and said to be one group',
    async () => {
      const r = await rollout(groupAgent('same-rollout', false), path.join(dir, 'same.db'), true);
      const summary = JSON.parse(r.stdout);
      expect(summary.firstPromptSplits).toEqual([]);
      expect(summary.groups[0].firstPrompt).toMatchObject({ status: 'same', checked: 4, distinct: 1, prompt: [0, 0, 0, 0] });
      expect([...summary.groups[0].rewards].sort()).toEqual([0, 0, 1, 1]);
    },
    patient(120_000),
  );

  it(
    'a first request that carries something of its own run: the split is in --json and said loudly at the end',
    async () => {
      const agent = groupAgent('split-rollout', true);
      const r = await rollout(agent, path.join(dir, 'split.db'), true);
      const summary = JSON.parse(r.stdout);
      expect(summary.firstPromptSplits).toEqual(['t']);
      expect(summary.groups[0].firstPrompt).toMatchObject({ status: 'split', checked: 4, distinct: 4, prompt: [0, 1, 2, 3] });
      const show = await polarCli(['rollout', 'show', summary.rolloutId, '--db', path.join(dir, 'split.db')], { env: { ...process.env, NO_COLOR: '1' } });
      expect(show.stdout).toMatch(/FIRST PROMPT SPLIT: 4 first prompts \(by sample: 0 1 2 3\)/);
      const text = await rollout(agent, path.join(dir, 'split-text.db'), false);
      expect(text.stdout).toMatch(
        /FIRST PROMPT SPLIT: task t: its samples have 4 different first prompts .*NeMo-RL groups GRPO samples by first-prompt token ids/,
      );
    },
    patient(120_000),
  );
});

describe('polar train grpo: NeMo-RL advantages of a gym-agent group of 4', () => {
  const train = async (name: string, split: boolean) => {
    const runDir = path.join(dir, name);
    const args = trainGrpoArgs({
      checkout,
      model: 'Qwen/Qwen3-0.6B',
      tasks,
      harness: nodeAgentHarness(groupAgent(name, split)),
      runDir,
      db: path.join(runDir, 'polar.db'),
      extra: ['--prompts-per-step', '1', '--group-size', '4', '--steps', '1', '--json'],
    });
    const r = await run(process.execPath, [POLAR_BIN, ...args], {
      env: trainEnv(fakeBin),
      timeout: patient(120_000),
    }).catch((err: { stdout: string; stderr: string }) => {
      const log = path.join(runDir, 'train.log');
      throw new Error(`polar train failed:\n${err.stdout}\n${err.stderr}\n${fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-3000) : ''}`);
    });
    const read = (f: string) =>
      fs
        .readFileSync(path.join(runDir, f), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    const lines = read('metrics.jsonl');
    return {
      // What NeMo-RL's TensorBoard logger holds (the stand-in writes it as NeMo-RL does), read as polar train reads it.
      tensorboard: stepAdvantages(new TensorboardScalars(path.join(runDir, 'logs')).poll()),
      result: JSON.parse(r.stdout),
      // A step's line (from NeMo-RL's stdout), and apart from it the line its advantages got when polar train read them from TensorBoard.
      metrics: lines.filter((m) => 'loss' in m),
      advantages: new Map(lines.filter((m) => !('loss' in m)).map((m) => [m.step, m.advantages])),
      logged: read('logs/exp_001/logged_metrics.jsonl'),
      log: fs.readFileSync(path.join(runDir, 'train.log'), 'utf8'),
    };
  };

  it(
    'one first prompt, rewards 0,1,0,1: one group, non-zero advantages (±1.1547 by NeMo-RL’s leave-one-out rule) and a non-zero loss',
    async () => {
      const { result, metrics, advantages, logged, log, tensorboard } = await train('train-same', false);
      expect(result).toMatchObject({ ok: true, steps: 1, zeroAdvantageSteps: [] });
      const [step] = metrics;
      expect(step.reward).toBe(0.5);
      expect(step.loss).toBeGreaterThan(0);
      // Each sample: (r − mean of the other three) / (their std + 1e-6), = ±(2/3)/√(1/3).
      expect(advantages.get(1).max).toBeCloseTo(1.1547, 4);
      expect(advantages.get(1).min).toBeCloseTo(-1.1547, 4);
      expect(logged[0]).toMatchObject({ 'train/polar_agent/polar_first_prompt_split/max': 0, 'train/polar_agent/polar_first_prompt_unchecked/max': 0 });
      expect(log).not.toMatch(/FIRST PROMPT SPLIT/);
      expect(tensorboard.get(1)!.max).toBeCloseTo(1.1547, 4);
    },
    patient(150_000),
  );

  it(
    'first prompts that differ within the group: the gym agent flags it (metric and log), every advantage is 0, polar train says so',
    async () => {
      const { result, metrics, advantages, logged, log, tensorboard } = await train('train-split', true);
      expect(result).toMatchObject({ ok: true, steps: 1, zeroAdvantageSteps: [1] });
      expect(metrics[0]).toMatchObject({ step: 1, reward: 0.5, loss: 0 });
      expect(advantages.get(1)).toEqual({ mean: 0, min: 0, max: 0 });
      expect(logged[0]['train/polar_agent/polar_first_prompt_split/max']).toBe(1);
      expect(log).toMatch(/polar gym-agent: FIRST PROMPT SPLIT: task t: its samples have \d different first prompts/);
      expect([...tensorboard]).toEqual([[1, { mean: 0, min: 0, max: 0 }]]);
    },
    patient(150_000),
  );
});
