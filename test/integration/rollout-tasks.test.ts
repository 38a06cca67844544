import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import { runShell } from '../../src/core/process/shell.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { captureDiff, prepareWorkspace, removeWorkspace } from '../../src/rollout/workspace.js';
import { scoreOnHost } from '../support/score.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The fixture task set is real: for every task, its workspace is prepared as a rollout would (copy,
 * clone at the commit, or empty; setup; baseline), its scripted correct solution earns reward 1 from
 * its own evaluator and its wrong solution earns less, with the agent's diff captured as a patch.
 */
const TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const tasks = readTaskFile(TASKS);
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-fixture-tasks-'));
afterAll(() => removeTree(scratch));

describe('fixture tasks', () => {
  it('there are at least six, in JavaScript and Python, of every workspace and evaluator kind', () => {
    expect(tasks.length).toBeGreaterThanOrEqual(6);
    const kinds = new Set(tasks.map((t) => Object.keys(t.workspace)[0]));
    expect(kinds).toEqual(new Set(['empty', 'dir', 'git']));
    expect(new Set(tasks.map((t) => t.evaluator.type))).toEqual(new Set(['command', 'tests']));
    expect(new Set(tasks.map((t) => t.metadata.language).filter(Boolean))).toEqual(new Set(['javascript', 'python']));
  });

  it.each(tasks.map((t) => [t.id, t] as const))('%s: the correct solution earns 1, the wrong one less', async (_id, task) => {
    const rewards: Record<string, number> = {};
    for (const which of ['correct', 'wrong'] as const) {
      const env = baseEnvironment();
      const ws = await prepareWorkspace(task, path.join(scratch, `${task.id}-${which}`), Date.now() + patient(60_000), env);
      for (const command of (task.metadata.mock as Record<string, string[]>)[which]!) {
        const r = await runShell(command, { cwd: ws.dir, env, timeoutMs: patient(30_000) });
        expect(r.exitCode, `${which}: ${command}\n${r.stderr}`).toBe(0);
      }
      const diff = await captureDiff(ws, env);
      expect(diff).toMatch(/^diff --git/m);
      const result = await scoreOnHost(task, ws, diff, { env, tasksDir: path.dirname(TASKS), scratch, sessionId: `ses-${which}` });
      rewards[which] = result.reward;
      await removeWorkspace(ws.dir);
    }
    expect(rewards.correct).toBe(1);
    expect(rewards.wrong).toBeLessThan(1);
  });
});
