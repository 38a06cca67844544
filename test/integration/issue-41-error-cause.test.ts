import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import { StageError } from '../../src/rollout/stage-error.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import { prepareWorkspace } from '../../src/rollout/workspace.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 41, item 5, on a real failure: a task whose git source does not exist. polar's StageError
 * says git's own reason first (issue 40); its cause is git's run as execa reported it, with the
 * whole command line and exit code the message leaves out.
 */
let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-cause-'));
});
afterAll(() => removeTree(dir));

describe('a failed git clone at INIT', () => {
  it("is a StageError whose cause is git's run, exit code and command line kept", async () => {
    const source = path.join(dir, 'no-such-repo.git');
    const task: RolloutTask = {
      id: 't',
      prompt: 'p',
      workspace: { git: source, commit: 'HEAD' },
      setup: [],
      evaluator: { type: 'command', command: 'true', timeout: 60 },
      timeout: null,
      metadata: {},
    };
    const err = await prepareWorkspace(task, path.join(dir, 'ws'), Date.now() + 60_000, baseEnvironment()).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StageError);
    const e = err as StageError;
    expect(e.stage).toBe('init');
    expect(e.message).toMatch(/^git clone failed \(exit 128\): fatal: .*no-such-repo\.git/);
    expect(e.cause).toBeInstanceOf(Error);
    const cause = e.cause as Error & { exitCode?: number; command?: string };
    expect(cause.exitCode).toBe(128);
    expect(cause.command).toMatch(/^git .*clone --quiet --no-checkout .*no-such-repo\.git/);
  });
});
