import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { agentRolloutArgs } from '../support/agent-rollout.js';
import { makeTrainBench, trainEnv, trainGrpoArgs, writeAnswerOneTasks } from '../support/nemo-rl-train.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 30: NeMo-RL groups GRPO samples by their first prompt's token ids, and without the sandbox a
 * harness sees its own sample's workspace folder. `train grpo` refuses `--sandbox none` unless told
 * the harness names no path, and even then its preflight runs the harness's first call as two
 * samples and refuses, showing where the two renders part; `rollout` warns.
 */
let dir: string;
let checkout: string;
let fakeBin: string;
let tasks: string;
let mock: MockServer;

/** A one-call agent whose first request says `what` (a JavaScript expression), then answers 1. */
function agent(name: string, what: string): string {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(
    file,
    `const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: ${what} }, { role: 'user', content: process.argv[2] }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();
(await import('node:fs')).writeFileSync('answer.txt', '1\\n');`,
  );
  return file;
}

beforeAll(async () => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-first-prompt-preflight-'));
  tasks = writeAnswerOneTasks(path.join(dir, 'tasks.jsonl'));
  mock = await startMockServer({ log: false, script: () => ({ content: 'done' }) });
});
afterAll(async () => {
  await mock?.close();
  removeTree(dir);
});

const env = () => trainEnv(fakeBin, { XDG_STATE_HOME: path.join(dir, 'state') });
const grpo = (script: string, runDir: string, extra: string[] = [], sandbox?: string[]) =>
  trainGrpoArgs({
    checkout,
    model: 'Qwen/Qwen3-0.6B',
    tasks,
    harness: nodeAgentHarness(script),
    runDir,
    db: path.join(runDir, 'polar.db'),
    extra,
    ...(sandbox ? { sandbox } : {}),
  });

describe('polar train grpo without the sandbox', () => {
  it(
    'refuses --sandbox none, saying why and what to do, before it makes anything',
    async () => {
      const runDir = path.join(dir, 'refused');
      const args = grpo(agent('plain-refused', "'you are an agent'"), runDir, [], ['--sandbox', 'none']);
      const r = await polarCli(args, { env: env(), timeout: patient(60_000) });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        /polar train grpo needs the bubblewrap sandbox: .*group of one with advantage 0.*Drop --sandbox none, or pass --allow-unsandboxed/s,
      );
      expect(fs.existsSync(runDir)).toBe(false);
    },
    patient(90_000),
  );

  it(
    "with --allow-unsandboxed, refuses a harness whose first prompt names its workspace, showing where two samples' renders part",
    async () => {
      const runDir = path.join(dir, 'split');
      const r = await polarCli(grpo(agent('cwd', "'working in ' + process.cwd()"), runDir), { env: env(), timeout: patient(120_000) });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/custom command-\w+ rendered a different first prompt for two samples of one task/);
      // The excerpt: each sample's own workspace folder, on its own marked line.
      expect(r.stderr).toMatch(/^\s+-working in \/tmp\/polar-first-prompt-\w+\/sample-0\/workspace$/m);
      expect(r.stderr).toMatch(/^\s+\+working in \/tmp\/polar-first-prompt-\w+\/sample-1\/workspace$/m);
      expect(r.stderr).toMatch(/drop --sandbox none/);
    },
    patient(150_000),
  );

  it(
    'with --allow-unsandboxed, passes a harness whose first prompt is the same for every sample',
    async () => {
      const runDir = path.join(dir, 'same');
      const r = await polarCli(grpo(agent('plain', "'you are an agent'"), runDir, ['--dry-run', '--json']), { env: env(), timeout: patient(120_000) });
      expect(r.code, r.stderr).toBe(0);
      expect(`${r.stdout}${r.stderr}`).not.toMatch(/different first prompt/);
    },
    patient(150_000),
  );
});

describe('polar rollout without the sandbox', () => {
  it(
    'warns that samples of a group get their own first prompts when --samples > 1, and not for one sample',
    async () => {
      const script = agent('rollout', "'you are an agent'");
      const rollout = (samples: string, db: string) =>
        polarCli(agentRolloutArgs({ tasks, agent: script, upstream: mock.url, db, dir }, ['--model', mock.model, '--samples', samples]), {
          env: { ...process.env, NO_COLOR: '1' },
          timeout: patient(120_000),
        });
      const two = await rollout('2', path.join(dir, 'r2.db'));
      expect(two.code, two.stderr).toBe(0);
      expect(two.stderr).toMatch(/warning: --sandbox none with --samples 2: .*NeMo-RL groups GRPO samples by that prompt's token ids.*use --sandbox bwrap/);
      const one = await rollout('1', path.join(dir, 'r1.db'));
      expect(one.code, one.stderr).toBe(0);
      expect(one.stderr).not.toMatch(/--sandbox none with --samples/);
    },
    patient(150_000),
  );
});
