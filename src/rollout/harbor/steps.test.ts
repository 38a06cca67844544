import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostRefusal } from './features.js';
import { readHarborSuite, readHarborTasks } from './load.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../../fixtures/harbor-features');
const made: string[] = [];
afterAll(() => {
  for (const d of made) removeTree(d);
});

/** A copy of the multi-step fixture with these files written over it (null removes one). */
function variant(files: Record<string, string | null>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-steps-'));
  made.push(root);
  const dir = path.join(root, 'multi-step');
  fs.cpSync(path.join(FIXTURES, 'multi-step'), dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) {
    if (text === null) removeTree(path.join(dir, file));
    else {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
  }
  return root;
}

const problems = (root: string) =>
  readHarborSuite(root)
    .invalid.flatMap((t) => t.problems)
    .join('\n');

describe('multi-step Harbor tasks ([[steps]], config.py:662-722; steps/<name>/, paths.py:140-189)', () => {
  it('load: the steps in order, each with its instruction, tests, solution and timeouts; the prompt is the first step', () => {
    const [task] = readHarborTasks(path.join(FIXTURES, 'multi-step'));
    const trial = task!.harbor!;
    expect(trial.steps!.map((s) => s.name)).toEqual(['create-file', 'append-content']);
    expect(trial.rewardStrategy).toBe('mean');
    expect(task!.prompt).toMatch(/^Create a file called hello\.txt/);
    const [create, append] = trial.steps!;
    expect(create!.solutionDir).toBe(path.join(trial.dir, 'steps', 'create-file', 'solution'));
    expect(append!.testsDir).toBe(path.join(trial.dir, 'steps', 'append-content', 'tests'));
    // [steps.agent].timeout_sec over the task's [agent] one; the task's budget is the first step's.
    expect(create!.agentTimeoutSec).toBe(60);
    expect(task!.timeout).toBe(60);
    expect(append!.verifierTimeoutSec).toBe(30);
    expect(append!.minReward).toBeNull();
  });

  it('a step without tests of its own uses the shared tests/test.sh, and the top-level solution/ when it has none', () => {
    const root = variant({
      'steps/create-file/tests': null,
      'steps/create-file/solution': null,
      'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      'solution/solve.sh': '#!/bin/bash\ntrue\n',
    });
    const [task] = readHarborTasks(root);
    const create = task!.harbor!.steps![0]!;
    expect(create.testsDir).toBeNull();
    expect(create.solutionDir).toBe(path.join(task!.harbor!.dir, 'solution'));
  });

  it('min_reward (a number gates `reward`, a table each metric) and multi_step_reward_strategy are read', () => {
    const toml = fs.readFileSync(path.join(FIXTURES, 'multi-step', 'task.toml'), 'utf8');
    const root = variant({
      'task.toml': `multi_step_reward_strategy = "final"\n${toml.replace('name = "create-file"', 'name = "create-file"\nmin_reward = 1.0').replace('name = "append-content"', 'name = "append-content"\nmin_reward = { accuracy = 0.5 }')}`,
    });
    const trial = readHarborTasks(root)[0]!.harbor!;
    expect(trial.rewardStrategy).toBe('final');
    expect(trial.steps!.map((s) => s.minReward)).toEqual([{ reward: 1 }, { accuracy: 0.5 }]);
  });

  it('a missing step instruction or test is reported with its path; no spurious top-level instruction.md or tests/test.sh', () => {
    const root = variant({ 'steps/append-content/instruction.md': null, 'steps/append-content/tests': null });
    const said = problems(root);
    expect(said).toMatch(/steps\/append-content\/instruction\.md: missing/);
    expect(said).toMatch(/steps\/append-content\/tests\/test\.sh: missing, and no shared tests\/test\.sh/);
    // The top-level instruction.md and tests/test.sh a multi-step task does not need (task.py:73-74, :143-170).
    expect(said).not.toMatch(/multi-step\/instruction\.md/);
    expect(said).not.toMatch(/multi-step\/tests\/test\.sh/);
    expect(said).not.toMatch(/not supported/);
  });

  it("a step's workdir/ and healthcheck are read; a step healthcheck is one more thing the host cannot run", () => {
    const toml = fs.readFileSync(path.join(FIXTURES, 'multi-step', 'task.toml'), 'utf8');
    const root = variant({
      'task.toml': toml.replace(
        '[steps.agent]\ntimeout_sec = 60.0',
        '[steps.agent]\ntimeout_sec = 60.0\n\n[steps.healthcheck]\ncommand = "test -e /run/ready"',
      ),
    });
    const trial = readHarborTasks(root)[0]!.harbor!;
    expect(trial.steps![0]!.healthcheck).toMatchObject({ command: 'test -e /run/ready', retries: 3 });
    expect(trial.steps![1]!.workdirDir).toBe(path.join(trial.dir, 'steps', 'append-content', 'workdir'));
    expect(hostRefusal(trial)).toMatch(/step create-file's healthcheck/);
    expect(hostRefusal(readHarborTasks(path.join(FIXTURES, 'multi-step'))[0]!.harbor!)).toBeNull();
  });

  it('what polar does not run in a step yet is refused by name, per task: users, artifacts, a separate verifier', () => {
    const toml = fs.readFileSync(path.join(FIXTURES, 'multi-step', 'task.toml'), 'utf8');
    const root = variant({
      'task.toml': `${toml.replace('[steps.agent]\ntimeout_sec = 60.0', '[steps.agent]\ntimeout_sec = 60.0\nuser = "agent"').replace('name = "append-content"', 'name = "append-content"\nartifacts = ["/app/out"]')}\n[verifier.environment]\ndocker_image = "debian:12-slim"\n`,
    });
    const said = problems(root);
    expect(said).toMatch(/"steps\[0\]\.agent\.user": agent\.user is not supported by polar yet in a step/);
    expect(said).toMatch(/"steps\[1\]\.artifacts": artifacts is not supported by polar yet in a step/);
    expect(said).toMatch(/a multi-step task with a separate verifier environment is not supported by polar yet/);
    // One task's problems, not the suite's: the others in the folder still load.
    expect(readHarborSuite(root).invalid.map((t) => t.id)).toEqual(['multi-step']);
  });
});
