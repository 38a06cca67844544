import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { polarE2e } from './support.js';

/**
 * Issue 41, item 4: a sample's agent timeout counts from the agent's start, as Harbor's
 * agent.timeout_sec does (asyncio.wait_for around agent.run, trial/trial.py:380-387); the
 * environment's start, its healthcheck, setup and the wait for a run slot have budgets of their own.
 * Each task here takes longer to prepare than its agent may run, and its oracle is quick: before,
 * the preparation ate the agent's budget and the sample timed out (two podman samples of a 60 s
 * task had 16.6 s of agent time); now it scores 1, and `polar rollout show` says where the time
 * went, phase by phase, in text and in --json.
 */
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const podman = workingEngines().includes('podman');
const HEALTHCHECK_FIXTURE = path.resolve(import.meta.dirname, '../../fixtures/harbor-features/healthcheck-service');

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-clock-'));
});
afterAll(() => removeTree(dir));

interface Summary {
  rolloutId: string;
  status: string;
  groups: { taskId: string; rewards: number[] }[];
  outcomes: Record<string, number>;
}
interface Shown {
  samples: { status: string; reward: number | null; error: string | null; timing: Record<string, number>; phases: Record<string, number> }[];
}

/** One oracle sample of `tasks`, then `rollout show` of it in text and in --json. */
async function oracleRollout(tasks: string, db: string, extra: string[]): Promise<{ summary: Summary; text: string; shown: Shown; stderr: string }> {
  const r = await polarE2e(['rollout', '--tasks', tasks, '--harness', 'oracle', '--samples', '1', '--db', db, '--json', ...extra]);
  expect(r.stdout, r.stderr).toMatch(/^\{/);
  const summary = JSON.parse(r.stdout) as Summary;
  const text = await polarE2e(['rollout', 'show', summary.rolloutId, '--db', db]);
  expect(text.code, text.stderr).toBe(0);
  const json = await polarE2e(['rollout', 'show', summary.rolloutId, '--db', db, '--json']);
  expect(json.code, json.stderr).toBe(0);
  return { summary, text: text.stdout, shown: JSON.parse(json.stdout) as Shown, stderr: r.stderr };
}

/** A one-step Harbor task whose step's setup.sh takes 5 s while its agent may run 3 s. */
function slowStepTask(root: string): string {
  const task = path.join(root, 'slow-step-setup');
  const step = path.join(task, 'steps', 'only');
  fs.mkdirSync(path.join(task, 'environment'), { recursive: true });
  fs.mkdirSync(path.join(step, 'workdir'), { recursive: true });
  fs.mkdirSync(path.join(step, 'solution'), { recursive: true });
  fs.mkdirSync(path.join(step, 'tests'), { recursive: true });
  fs.writeFileSync(
    path.join(task, 'task.toml'),
    [
      'schema_version = "1.1"',
      '[task]',
      'name = "polar/slow-step-setup"',
      '[agent]',
      'timeout_sec = 3.0',
      '[verifier]',
      'timeout_sec = 30.0',
      '[[steps]]',
      'name = "only"',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(task, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\n');
  fs.writeFileSync(path.join(step, 'instruction.md'), 'Copy /app/ready.txt to /app/out.txt.\n');
  fs.writeFileSync(path.join(step, 'workdir', 'setup.sh'), '#!/bin/bash\nsleep 5\nprintf ready > /app/ready.txt\n');
  fs.writeFileSync(path.join(step, 'solution', 'solve.sh'), '#!/bin/bash\ncp /app/ready.txt /app/out.txt\n');
  fs.writeFileSync(
    path.join(step, 'tests', 'test.sh'),
    '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = ready ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
  );
  return task;
}

describe.skipIf(noSandbox !== null)(`the agent's clock on the host environment${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  it(
    "a Harbor step's setup.sh that takes longer than the agent's timeout is not the agent's time: the oracle scores 1, and rollout show gives each phase",
    async () => {
      const db = path.join(dir, 'harbor.db');
      const { summary, text, shown, stderr } = await oracleRollout(slowStepTask(path.join(dir, 'harbor')), db, ['--environment', 'host']);
      expect(summary.outcomes, stderr).toMatchObject({ completed: 1 });
      expect(summary.groups[0]!.rewards).toEqual([1]);
      const [s] = shown.samples;
      expect(s!.phases.step_setup_ms).toBeGreaterThanOrEqual(5000);
      expect(s!.phases.agent_ms).toBeLessThan(3000);
      for (const phase of ['prepare_ms', 'wait_ms', 'collect_ms', 'verify_ms', 'total_ms']) expect(s!.phases[phase], phase).toBeGreaterThanOrEqual(0);
      expect(s!.phases.total_ms).toBeGreaterThanOrEqual(s!.phases.step_setup_ms! + s!.phases.agent_ms!);
      // The text view: one line per sample under its group's table, each phase in seconds.
      expect(text).toMatch(
        /#0 time: prepare \d+\.\d s · wait \d+\.\d s · step setup [5-9]\.\d s · agent [0-2]\.\d s · collect \d+\.\d s · verify \d+\.\d s · total \d+\.\d s/,
      );
    },
    patient(120_000),
  );

  it(
    "a JSONL task's setup commands have a budget of their own: 4 s of setup and a 3 s solution both fit a 6 s timeout",
    async () => {
      // `polar rollout --harness oracle` runs Harbor tasks only; `tasks check` runs a JSONL task's "solution".
      const tasks = path.join(dir, 'tasks.jsonl');
      fs.writeFileSync(
        tasks,
        `${JSON.stringify({
          id: 'slow-setup',
          prompt: 'Create done.txt.',
          workspace: { empty: true },
          setup: ['sleep 4'],
          evaluator: { type: 'command', command: 'test -f done.txt', timeout: 30 },
          timeout: 6,
          solution: ['sleep 3 && touch done.txt'],
        })}\n`,
      );
      const r = await polarE2e(['tasks', 'check', tasks, '--no-forge', '--json']);
      const check = JSON.parse(r.stdout) as { results: { task: string; oracle: { reward: number | null; error: string | null } }[] };
      expect(check.results[0]!.oracle, r.stderr).toMatchObject({ reward: 1, error: null });
    },
    patient(120_000),
  );
});

describe.skipIf(!podman)(`the agent's clock in podman${podman ? '' : ' (skipped: `podman info` fails here)'}`, () => {
  it(
    "a healthcheck whose start period outlasts the agent's timeout is not the agent's time: the oracle scores 1",
    async () => {
      // The fixture's service answers 5 s after its container starts; the agent may run 4 s.
      const task = path.join(dir, 'podman', 'healthcheck-service');
      fs.cpSync(HEALTHCHECK_FIXTURE, task, { recursive: true });
      const toml = path.join(task, 'task.toml');
      fs.writeFileSync(toml, fs.readFileSync(toml, 'utf8').replace('timeout_sec = 120.0', 'timeout_sec = 4.0'));
      const { summary, text, shown, stderr } = await oracleRollout(task, path.join(dir, 'podman.db'), ['--environment', 'podman']);
      expect(summary.outcomes, stderr).toMatchObject({ completed: 1 });
      expect(summary.groups[0]!.rewards).toEqual([1]);
      const [s] = shown.samples;
      // The container's start and its healthcheck are in prepare; the image's build (or its reuse) apart.
      expect(s!.phases.prepare_ms).toBeGreaterThanOrEqual(5000);
      expect(s!.phases.build_ms).toBeGreaterThanOrEqual(0);
      expect(s!.phases.agent_ms).toBeLessThan(4000);
      expect(text).toMatch(
        /#0 time: build \d+\.\d s · prepare \d+\.\d s · wait \d+\.\d s · agent \d+\.\d s · collect \d+\.\d s · verify \d+\.\d s · total \d+\.\d s/,
      );
    },
    patient(300_000),
  );
});
