import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostRefusal } from './features.js';
import { readHarborSuite, readHarborTasks } from './load.js';
import { stepsRefusal } from '../multi-step.js';
import { loadNotices } from './trial.js';
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

  it('what polar does not run in a step yet loads, named in the step: its own users, network and collect hooks, a separate verifier', () => {
    const toml = fs.readFileSync(path.join(FIXTURES, 'multi-step', 'task.toml'), 'utf8');
    const root = variant({
      'task.toml': `${toml
        .replace('[steps.agent]\ntimeout_sec = 60.0', '[steps.agent]\ntimeout_sec = 60.0\nuser = "agent"\nnetwork_mode = "public"')
        .replace('name = "append-content"', 'name = "append-content"\nartifacts = ["/app/out"]')
        .replace(
          '[steps.verifier]\ntimeout_sec = 30.0',
          '[steps.verifier]\ntimeout_sec = 30.0\nuser = "grader"\n[[steps.verifier.collect]]\ncommand = "true"',
        )}\n[verifier.environment]\ndocker_image = "debian:12-slim"\n`,
    });
    expect(problems(root)).toBe('');
    const [task] = readHarborTasks(root);
    const [first, second] = task!.harbor!.steps!;
    expect(first!.unsupported).toEqual([
      'step create-file\'s separate verifier environment (the task\'s [verifier]: environment_mode = "separate")',
      'step create-file\'s own agent user (steps[0].agent.user = "agent")',
      "step create-file's own agent network (steps[0].agent.network_mode)",
    ]);
    expect(second!.unsupported.slice(1)).toEqual([
      'step append-content\'s own verifier user (steps[1].verifier.user = "grader")',
      "step append-content's [[steps.verifier.collect]] hooks",
    ]);
    expect(second!.artifacts).toEqual([{ source: '/app/out', destination: null, exclude: [] }]);
    // Its samples refuse it before the first step, saying so (step-stages.ts).
    expect(stepsRefusal(task!.harbor!)).toMatch(
      /^task polar\/multi-step: step create-file's separate verifier environment .*: not supported by polar yet in a multi-step task/,
    );
  });

  it("keys StepConfig does not define are ignored with a notice, as pydantic ignores them (dependencies, inherit_prior_session); a step's own verifier mode loads", () => {
    const toml = fs.readFileSync(path.join(FIXTURES, 'multi-step', 'task.toml'), 'utf8');
    const root = variant({
      'task.toml': toml
        .replace('name = "create-file"', 'name = "create-file"\ndependencies = []\ninherit_prior_session = true')
        .replace('[steps.verifier]\ntimeout_sec = 30.0', '[steps.verifier]\ntimeout_sec = 30.0\nenvironment_mode = "shared"\ncolour = 1'),
    });
    expect(problems(root)).toBe('');
    const [task] = readHarborTasks(root);
    expect(task!.harbor!.ignored).toEqual([
      'task.toml, field "steps[0].dependencies": ignored, as Harbor\'s StepConfig ignores keys it does not define',
      'task.toml, field "steps[0].inherit_prior_session": ignored, as Harbor\'s StepConfig ignores keys it does not define',
      'task.toml, field "steps[1].verifier.colour": ignored, as Harbor\'s VerifierConfig ignores keys it does not define',
    ]);
    expect(task!.harbor!.steps!.map((s) => s.unsupported)).toEqual([[], []]);
    expect(loadNotices([task!])).toEqual(task!.harbor!.ignored!.map((l) => `notice: task multi-step: ${l}`));
  });
});
