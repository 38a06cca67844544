import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTrainBench, trainEnv, trainGrpoArgs, writeAnswerOneTasks, writeOneCallAgent } from '../support/nemo-rl-train.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar train grpo` on a node where bubblewrap is installed but cannot make a sandbox (unprivileged
 * user namespaces blocked, as on many GPU nodes): the agent would find out only once NeMo-RL had
 * loaded the model and NeMo Gym posted the first /run. Preflight probes it and refuses before
 * anything starts.
 */
let dir: string;
let checkout: string;
let fakeBin: string;
let tasks: string;
let agent: string;

beforeAll(() => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-train-bwrap-'));
  // bwrap as it answers where user namespaces are blocked.
  fs.writeFileSync(
    path.join(fakeBin, 'bwrap'),
    '#!/bin/sh\necho "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
    {
      mode: 0o755,
    },
  );
  agent = writeOneCallAgent(path.join(dir, 'agent.mjs'), "'1\\n'");
  tasks = writeAnswerOneTasks(path.join(dir, 'tasks.jsonl'));
});
afterAll(() => removeTree(dir));

// The shared line runs without a sandbox; these runs choose theirs (--allow-unsandboxed stays, as there).
const args = (runDir: string, sandbox: string[]) =>
  trainGrpoArgs({
    checkout,
    model: 'Qwen/Qwen3-0.6B',
    tasks,
    harness: nodeAgentHarness(agent),
    sandbox: ['--allow-unsandboxed', ...sandbox],
    runDir,
    db: path.join(runDir, 'polar.db'),
  });

describe('polar train grpo with a bubblewrap that cannot make a sandbox', () => {
  it('refuses before starting NeMo-RL, with bwrap’s reason and the way out (bwrap chosen by default, or asked for)', {
    timeout: patient(120_000),
  }, async () => {
    const env = trainEnv(fakeBin, { POLAR_STATE_DIR: path.join(dir, 'state') });
    for (const sandbox of [[], ['--sandbox', 'bwrap']]) {
      const runDir = path.join(dir, `run${sandbox.length}`);
      const outcome = await polarCli(args(runDir, sandbox), { env, timeout: patient(100_000) });
      expect(outcome.code).toBe(2);
      expect(outcome.stderr).toMatch(/cannot start grpo:/);
      expect(outcome.stderr).toMatch(/bubblewrap \(.*bwrap\) cannot make a sandbox on this machine: bwrap: No permissions to creating new namespace/);
      expect(outcome.stderr).toMatch(/allow unprivileged user namespaces/);
      // Nothing started: no NeMo-RL log, and the refused run left no run directory behind.
      expect(fs.existsSync(path.join(runDir, 'train.log'))).toBe(false);
      expect(fs.existsSync(runDir)).toBe(false);
    }
  });
});
