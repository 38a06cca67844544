import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { MASK_KINDS } from '../../src/rollout/sample-mask.js';
import { getKey, leafKeys } from '../../src/train/nemo-rl/config.js';
import { loadContract, missingKeys, requiredKeys } from '../../src/train/nemo-rl/contract.js';
import { loadWithInheritance } from '../../src/train/nemo-rl/merge.js';
import { parseYaml } from '../../src/train/yaml.js';
import { writeFixtureCheckout } from '../support/nemo-rl-checkout.js';
import { makeTrainBench, trainEnv, trainGrpoArgs, writeOneCallAgent, writeTaskFile } from '../support/nemo-rl-train.js';
import { nodeAgentHarness, POLAR_BIN as BIN } from '../support/polar-cli.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';

/**
 * `polar train` against a stand-in NeMo-RL checkout (test/support/fake-nemo-rl: its launcher reads
 * the generated config, asserts what NeMo-RL asserts, starts the agent the way NeMo Gym does, posts
 * /run rows, prints NeMo-RL's own log lines and writes checkpoints) and stand-ins for `uv` and
 * `nvidia-smi`. A real GPU run is only checked on a machine with an NVIDIA GPU and NeMo-RL (README).
 */
const KEYS = path.resolve(__dirname, '../../fixtures/nemo-rl');
const run = promisify(execFile);
let dir: string;
let checkout: string;
let fakeBin: string;
let tasks: string;
let agent: string;

const keys = (name: string) =>
  new Set(
    fs
      .readFileSync(path.join(KEYS, `${name}.keys`), 'utf8')
      .split('\n')
      .filter((l) => l && !l.startsWith('#')),
  );

beforeAll(() => {
  // The checkout is built from the pinned list: the files it names, each pinned line reading its
  // key, and base configs with exactly the pinned keys (so the launcher's merged-key check is NeMo-RL's).
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-train-'));
  // A small real agent (the custom harness): one model call through polar, then it writes the answer.
  agent = writeOneCallAgent(path.join(checkout, 'agent.mjs'), "process.argv[2].split(' ').pop() + '\\n'");
  tasks = writeTaskFile(
    path.join(dir, 'tasks.jsonl'),
    ['a', 'b', 'c'].map((id, i) => ({
      id,
      prompt: `answer with ${i % 2}`,
      workspace: { empty: true },
      evaluator: { type: 'command', command: 'cat answer.txt' },
      timeout: patientSeconds(60),
    })),
  );
});
afterAll(() => removeTree(dir));

const grpoArgs = (runDir: string, extra: string[] = []): string[] => [
  BIN,
  ...trainGrpoArgs({ checkout, model: 'Qwen/Qwen3-0.6B', tasks, harness: nodeAgentHarness(agent), runDir, db: path.join(runDir, 'polar.db'), extra }),
];
/** `train sft` on the stand-in checkout and the small model, then `rest`. */
const sftArgs = (...rest: string[]): string[] => [BIN, 'train', 'sft', '--nemo-rl', checkout, '--model', 'Qwen/Qwen3-0.6B', ...rest];

/** An SFT data file of one example (the user's "hi", the assistant's "hello", then `extra`'s fields). */
function oneSftExample(file: string, extra: Record<string, unknown> = {}): string {
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'hello' },
  ];
  fs.writeFileSync(file, `${JSON.stringify({ messages, ...extra })}\n`);
  return file;
}

// POLAR_AUTH_TOKEN set, as for a user who guards their proxy: NeMo-RL hands it on to Gym and the
// agent, which must not then demand it of Gym's /run calls (Gym sends none).
const envWithFakes = () => trainEnv(fakeBin, { POLAR_AUTH_TOKEN: 'users-proxy-token-0123456789' });

describe('polar train grpo --dry-run', () => {
  it('writes a complete, consistent run directory: the config holds only keys NeMo-RL has (7ea279a), the Gym wiring, the dataset and the command', async () => {
    const runDir = path.join(dir, 'dry');
    const { stdout, stderr } = await run(
      process.execPath,
      [
        ...grpoArgs(runDir, [
          '--dry-run',
          '--steps',
          '5',
          '--set',
          'loss_fn.reference_policy_kl_penalty=0.001',
          '--lora',
          '--thinking',
          'off',
          '--reward-key',
          'correctness',
          '--reward-range',
          '-1,1',
        ]),
      ],
      { env: { ...process.env, NO_COLOR: '1', PATH: '/usr/bin:/bin' } },
    );
    // No GPU, no uv here: warnings, not failures.
    expect(stderr).toMatch(/warning: no NVIDIA GPU/);
    expect(stderr).toMatch(/warning: no `uv` on PATH/);
    expect(stderr).toMatch(/dry run: wrote .*; nothing started/);
    expect(stdout).toContain(`uv run python examples/nemo_gym/run_grpo_nemo_gym.py --config ${path.join(runDir, 'grpo.yaml')}`);
    const config = parseYaml(fs.readFileSync(path.join(runDir, 'grpo.yaml'), 'utf8'));
    const known = new Set([...keys('grpo_math_1B'), ...keys('grpo_workplace_assistant_nemotron_nano_v2_9b')]);
    expect(leafKeys(config).filter((k) => !known.has(k))).toEqual([]);
    // The other way: grpo.yaml merged onto the checkout's base by NeMo-RL's rule holds every key the
    // pinned list says the run reads unguarded (the replaced data section once lacked one: setup() crashed).
    const merged = loadWithInheritance(path.join(runDir, 'grpo.yaml'), (f) => fs.readFileSync(f, 'utf8'));
    expect(requiredKeys('grpo', loadContract(), merged).length).toBeGreaterThan(80);
    expect(missingKeys('grpo', loadContract(), merged)).toEqual([]);
    expect(getKey(merged, 'data.use_multiple_dataloader')).toBe(false);
    // Preflight read the checkout against the list: a checkout as pinned has nothing to report.
    expect(stderr).not.toMatch(/differs from the pinned list/);
    expect(JSON.parse(fs.readFileSync(path.join(runDir, 'nemo-rl-check.json'), 'utf8'))).toMatchObject({
      missingFiles: [],
      moved: [],
      gone: [],
      missingKeys: [],
    });
    expect(getKey(config, 'defaults')).toBe(path.join(checkout, 'examples/configs/grpo_math_1B.yaml'));
    expect(getKey(config, 'policy.train_global_batch_size')).toBe(4);
    expect(getKey(config, 'grpo.num_generations_per_prompt')).toBe(2);
    expect(getKey(config, 'grpo.max_val_samples')).toBeNull();
    expect(getKey(config, 'policy.generation.vllm_cfg.expose_http_server')).toBe(true);
    expect(getKey(config, 'policy.dtensor_cfg.lora_cfg.enabled')).toBe(true);
    expect(getKey(config, 'loss_fn.reference_policy_kl_penalty')).toBe(0.001);
    expect(getKey(config, 'env.should_use_nemo_gym')).toBe(true);
    const paths = getKey(config, 'env.nemo_gym.config_paths') as string[];
    expect(paths[0]).toBe('responses_api_models/vllm_model/configs/vllm_model_for_training.yaml');
    expect(fs.existsSync(paths[1]!)).toBe(true);
    // 3 tasks at 2 per step: 1 step per epoch, so 5 epochs for 5 steps.
    expect(getKey(config, 'grpo.max_num_epochs')).toBe(5);
    const rows = fs
      .readFileSync(getKey(config, 'data.train.data_path') as string, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows[0]).toMatchObject({
      responses_create_params: { input: [{ role: 'user', content: 'answer with 0' }] },
      agent_ref: { type: 'responses_api_agents', name: 'polar_agent' },
      task_id: 'a',
    });
    // A row names its task; the code (setup, evaluator) stays in the task file the agent was given.
    expect(rows.every((r) => r.task === undefined)).toBe(true);
    const app = fs.readFileSync(path.join(runDir, 'gym/responses_api_agents/polar_agent/app.py'), 'utf8');
    expect(app).toMatch(/^import os$/m);
    expect(app).toContain('"gym-agent","--from-gym"');
    // The package's own launcher by its real path (under npx, argv[1] is a link into npx's cache).
    expect(app).toContain(`${JSON.stringify(fs.realpathSync(BIN))},"gym-agent"`);
    expect(app).toContain(`"--tasks",${JSON.stringify(tasks)}`);
    // The agent pins every call to policy.generation's pair (issue 30, 3): the session never chooses its sampling.
    expect(app).toContain('"--temperature","1","--top-p","1"');
    // And to the chat template's thinking switch train grpo was given (the session's own is replaced).
    expect(app).toContain('"--thinking","off"');
    // Which metric of a Harbor verifier's reward.json is the reward: the agent scores by the one train was given.
    expect(app).toContain('"--reward-key","correctness"');
    // And the rewards it takes (--reward-range, rollout/reward-range.ts): one argument, so a negative LO cannot read as a flag.
    expect(app).toContain('"--reward-range=-1,1"');
    // Pinned to loopback: NeMo-RL's default_host (the node's IP) would otherwise put /run on the network.
    expect(parseYaml(fs.readFileSync(paths[1]!, 'utf8'))).toEqual({
      polar_agent: { responses_api_agents: { polar_agent: { entrypoint: 'app.py', host: '127.0.0.1' } } },
    });
    expect(app.split('\n').filter((l) => l && !l.startsWith('#'))).toHaveLength(2); // import and exec: no logic
    expect(fs.existsSync(path.join(runDir, 'gym/pyproject.toml'))).toBe(true);
  });

  it("sft --dry-run: openai_format data, the model's own template, no validation set", async () => {
    const data = oneSftExample(path.join(dir, 'sft.jsonl'), { tools: [] });
    const { stderr } = await run(process.execPath, sftArgs('--data', data, '--run-dir', path.join(dir, 'sft-dry'), '--dry-run'), {
      env: { ...process.env, PATH: '/usr/bin:/bin' },
    });
    const config = parseYaml(fs.readFileSync(path.join(dir, 'sft-dry', 'sft.yaml'), 'utf8'));
    // One example and the default batch of 32 would train zero steps (drop_last): the batch is lowered, and said.
    expect(getKey(config, 'policy.train_global_batch_size')).toBe(1);
    expect(stderr).toMatch(
      /warning: the SFT data has 1 examples?, fewer than the batch of 32: NeMo-RL drops an incomplete batch \(sft\.py:159-166\).*lowered policy\.train_global_batch_size to 1/,
    );
    expect(
      missingKeys(
        'sft',
        loadContract(),
        loadWithInheritance(path.join(dir, 'sft-dry', 'sft.yaml'), (f) => fs.readFileSync(f, 'utf8')),
      ),
    ).toEqual([]);
    // On two GPUs one example cannot fill a rank each: refused, with the fix.
    const twoGpus = await run(process.execPath, sftArgs('--data', data, '--gpus', '2', '--run-dir', path.join(dir, 'sft-dry2'), '--dry-run'), {
      env: { ...process.env, PATH: '/usr/bin:/bin' },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(twoGpus).toMatchObject({ code: 2 });
    expect(twoGpus.stderr).toMatch(
      /error: the SFT data has 1 example, fewer than one batch of 2 \(2 data-parallel ranks × micro-batch 1\).*Export more accepted samples/,
    );
    // Beyond sft.yaml's keys: the openai_format dataset's own parameters, as the pinned list records them.
    const openaiFormat = [
      'data.validation',
      ...loadContract()
        .datasets.find((d) => d.name === 'openai_format')!
        .params.map((p) => `data.train.${p}`),
    ];
    expect(leafKeys(config).filter((k) => !keys('sft').has(k) && !openaiFormat.includes(k))).toEqual([]);
    expect(getKey(config, 'data.train')).toMatchObject({ dataset_name: 'openai_format', data_path: data, chat_key: 'messages', tool_key: 'tools' });
    expect(getKey(config, 'policy.tokenizer.chat_template')).toBe('default');
    expect(getKey(config, 'sft.val_period')).toBe(0);
  });

  it(
    'refuses what cannot work, before anything slow: no checkout, a batch that splits groups, too few tasks',
    async () => {
      const fail = async (args: string[]) =>
        run(process.execPath, args, { env: { ...process.env, PATH: '/usr/bin:/bin' } }).then(
          (r) => ({ code: 0, stderr: r.stderr }),
          (e: { code: number; stderr: string }) => e,
        );
      // A real run without a checkout is refused, and leaves no run directory behind.
      const noCheckout = await fail([...grpoArgs(path.join(dir, 'x1'), []).map((a) => (a === checkout ? '/nonexistent/RL' : a))]);
      expect(noCheckout.stderr).toMatch(/no NeMo-RL checkout at \/nonexistent\/RL: clone it with `git clone --recursive/);
      expect(fs.existsSync(path.join(dir, 'x1'))).toBe(false);
      // A dry run without one writes the run directory and says what it could not check.
      const dryNoCheckout = await fail([...grpoArgs(path.join(dir, 'x0', 'run'), ['--dry-run']).map((a) => (a === checkout ? '/nonexistent/RL' : a))]);
      expect(dryNoCheckout.code, dryNoCheckout.stderr).toBe(0);
      expect(dryNoCheckout.stderr).toMatch(
        /warning: no NeMo-RL checkout at \/nonexistent\/RL: the config is written but not merged with NeMo-RL's base config nor checked against it; clone it with `git clone --recursive/,
      );
      expect(fs.existsSync(path.join(dir, 'x0', 'run', 'grpo.yaml'))).toBe(true);
      // sft refused (no examples in the database, or no checkout) leaves nothing either, its parent folders included.
      const emptyDb = path.join(dir, 'empty.db');
      Store.open(emptyDb).close();
      const noExamples = await fail(sftArgs('--db', emptyDb, '--run-dir', path.join(dir, 'sft-none', 'run')));
      expect(noExamples.code).toBe(2);
      expect(noExamples.stderr).toMatch(/no SFT examples in/);
      const data = oneSftExample(path.join(dir, 'one.jsonl'));
      const sftNoCheckout = await fail([
        BIN,
        'train',
        'sft',
        '--nemo-rl',
        '/nonexistent/RL',
        '--model',
        'Qwen/Qwen3-0.6B',
        '--data',
        data,
        '--run-dir',
        path.join(dir, 'sft-refused', 'run'),
      ]);
      expect(sftNoCheckout.code).toBe(2);
      expect(sftNoCheckout.stderr).toMatch(/cannot start sft:[\s\S]*no NeMo-RL checkout/);
      expect(fs.existsSync(path.join(dir, 'sft-none'))).toBe(false);
      expect(fs.existsSync(path.join(dir, 'sft-refused'))).toBe(false);
      const split = await fail(grpoArgs(path.join(dir, 'x2'), ['--dry-run', '--set', 'policy.train_global_batch_size=3']));
      expect(split.stderr).toMatch(/train_global_batch_size 3 is not a multiple of the group size 2/);
      const few = await fail(grpoArgs(path.join(dir, 'x3'), ['--dry-run', '--prompts-per-step', '4']));
      expect(few.stderr).toMatch(/the task file has 3 tasks but --prompts-per-step is 4/);
      expect(noCheckout.code).toBe(2);
      // A checkout whose base config lacks a key NeMo-RL reads unguarded: refused before anything starts.
      const older = writeFixtureCheckout(path.join(dir, 'RL-older'), { omitKeys: ['policy.generation.max_new_tokens'] });
      const lacking = await fail([...grpoArgs(path.join(dir, 'x4'), ['--dry-run']).map((a) => (a === checkout ? older : a))]);
      expect(lacking.code).toBe(2);
      expect(lacking.stderr).toMatch(
        /error: the config merged onto .*RL-older's base config has no policy\.generation\.max_new_tokens, which NeMo-RL reads unguarded \(nemo_rl\/.*\): set it with --set policy\.generation\.max_new_tokens=/,
      );
      // Six polar processes in a row: on a busy 2-core machine that passes vitest's 30 s default.
    },
    patient(180_000),
  );
});

describe('polar train check-nemo-rl', () => {
  it('reads a checkout against the pinned list: as pinned it matches; a base config without a key read unguarded, or moved lines, are reported', async () => {
    const ok = await run(process.execPath, [BIN, 'train', 'check-nemo-rl', checkout], { env: { ...process.env, NO_COLOR: '1' } });
    expect(ok.stdout).toMatch(
      /^grpo: \d{3} reads checked, 0 moved, 0 gone, 0 files missing, 0 keys missing after the merge, 0 asserts failed, 0 new reads to review$/m,
    );
    expect(ok.stdout).toContain(`${checkout} matches polar's pinned list (NeMo-RL 7ea279a)`);
    const newer = writeFixtureCheckout(path.join(dir, 'RL-newer'), { omitKeys: ['data.shuffle'], shift: { file: 'nemo_rl/algorithms/sft.py', by: 3 } });
    // Drift alone is a warning (exit 0): the list was read at another commit and should be read again.
    const report = JSON.parse((await run(process.execPath, [BIN, 'train', 'check-nemo-rl', newer, '--json'], { env: process.env })).stdout);
    expect(report.ok).toBe(true);
    expect(report.warnings).toEqual([expect.stringMatching(/^sft: NeMo-RL checkout differs from the pinned list: \d+ of \d+ reads moved/)]);
    // polar writes data.shuffle for SFT itself; GRPO too: a base without it is no error for either run.
    expect(report.reports.sft.missingKeys).toEqual([]);
    expect(report.reports.sft.moved.find((m: { key: string }) => m.key === 'data.shuffle')).toMatchObject({
      file: 'nemo_rl/algorithms/sft.py',
      from: [162],
      to: [165],
    });
    const older = writeFixtureCheckout(path.join(dir, 'RL-nokey'), { omitKeys: ['policy.train_micro_batch_size'] });
    const missing = await run(process.execPath, [BIN, 'train', 'check-nemo-rl', older, '--json'], { env: process.env }).catch(
      (e: { code: number; stdout: string }) => e,
    );
    expect(missing).toMatchObject({ code: 2 });
    expect(JSON.parse(missing.stdout).errors).toEqual([
      expect.stringMatching(/^grpo: .* has no policy\.train_micro_batch_size, which NeMo-RL reads unguarded/),
      expect.stringMatching(/^sft: .* has no policy\.train_micro_batch_size, which NeMo-RL reads unguarded/),
    ]);
  });
});

describe('polar train grpo with a stand-in NeMo-RL', () => {
  it(
    'runs the launcher with the config, serves every /run through polar, records metrics and checkpoints',
    async () => {
      const runDir = path.join(dir, 'full');
      const { stdout } = await run(process.execPath, [...grpoArgs(runDir, ['--steps', '2', '--set', 'checkpointing.save_period=1', '--json'])], {
        env: envWithFakes(),
        timeout: patient(120_000),
      });
      // Each group's two samples get the same reward (tasks a and b answer 0 and 1 every time), so every
      // advantage is 0: the stand-in's loss is 0 and polar train names the steps that trained nothing.
      expect(JSON.parse(stdout)).toMatchObject({ ok: true, exitCode: 0, steps: 2, checkpoint: 2, zeroAdvantageSteps: [1, 2], maskedSteps: [] });
      const lines = fs
        .readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      // A step's line comes from NeMo-RL's stdout; its advantages from the TensorBoard events, on a line of their own.
      const metrics = lines.filter((m) => 'loss' in m);
      const advantages = new Map(lines.filter((m) => !('loss' in m)).map((m) => [m.step, m.advantages]));
      expect(metrics.map((m) => [m.step, m.maxSteps, m.loss, advantages.get(m.step)])).toEqual([
        [1, 2, 0, { mean: 0, min: 0, max: 0 }],
        [2, 2, 0, { mean: 0, min: 0, max: 0 }],
      ]);
      // Each step's masked share, read from the same events (NeMo-RL logs the agent's numeric result
      // fields as polar_agent/polar_masked*/mean): none masked, every kind at 0.
      const noneMasked = { share: 0, byKind: Object.fromEntries(MASK_KINDS.map((k) => [k, 0])) };
      expect(lines.filter((m) => !('loss' in m)).map((m) => [m.step, m.masked])).toEqual([
        [1, noneMasked],
        [2, noneMasked],
      ]);
      // Three tasks at two per step: one full batch per epoch, tasks a and b (rewards 0 and 1, two samples each).
      expect(metrics.map((m) => m.reward)).toEqual([0.5, 0.5]);
      // As NeMo-RL, the stand-in prints no advantages: the zero steps above came from its TensorBoard events.
      expect(fs.readFileSync(path.join(runDir, 'train.log'), 'utf8')).toMatch(/SETUP COMPLETE/);
      expect(fs.readFileSync(path.join(runDir, 'train.log'), 'utf8')).not.toMatch(/advantages\//);
      const store = Store.open(path.join(runDir, 'polar.db'), { readonly: true });
      try {
        const [rollout] = store.rollouts.list();
        expect(rollout!.config).toMatchObject({ source: 'gym-agent' });
        const samples = store.rollouts.samples(rollout!.id);
        expect(samples).toHaveLength(8);
        expect(samples.every((s) => s.status === 'completed' && store.requests.list(s.sessionId!).length === 1)).toBe(true);
      } finally {
        store.close();
      }
    },
    patient(150_000),
  );

  it(
    'Ctrl-C stops NeMo-RL (its whole process group); --resume continues from the newest checkpoint',
    async () => {
      const runDir = path.join(dir, 'resume');
      const child = spawn(process.execPath, grpoArgs(runDir, ['--steps', '3', '--set', 'checkpointing.save_period=1']), {
        env: envWithFakes(),
        stdio: 'ignore',
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const metrics = path.join(runDir, 'metrics.jsonl');
      try {
        await waitUntil('step 1 in metrics.jsonl', () => fs.existsSync(metrics) && fs.readFileSync(metrics, 'utf8').includes('"step":1'), {
          stopIf: () => (child.exitCode !== null ? `train grpo exited (${child.exitCode}) before step 1` : null),
          everyMs: 100,
        });
      } finally {
        child.kill('SIGINT');
      }
      expect(await exited).not.toBe(0);
      expect(fs.existsSync(path.join(runDir, 'checkpoints', 'step_1'))).toBe(true);
      expect(fs.existsSync(path.join(runDir, 'checkpoints', 'step_3'))).toBe(false);
      expect(fs.readFileSync(path.join(runDir, 'train.log'), 'utf8')).toMatch(/Interrupted: stopping/);
      // A fresh run in the same directory would silently resume: polar refuses it.
      const fresh = await run(process.execPath, grpoArgs(runDir, ['--steps', '3']), { env: envWithFakes() }).catch((e: { stderr: string }) => e);
      expect(fresh.stderr).toMatch(/already has checkpoints .*pass --resume/);
      const { stdout } = await run(process.execPath, [...grpoArgs(runDir, ['--steps', '3', '--set', 'checkpointing.save_period=1', '--resume', '--json'])], {
        env: envWithFakes(),
        timeout: patient(120_000),
      });
      expect(JSON.parse(stdout)).toMatchObject({ ok: true, checkpoint: 3 });
      expect(fs.readFileSync(path.join(runDir, 'train.log'), 'utf8')).toMatch(/Resuming from step [12]/);
      const steps = fs
        .readFileSync(metrics, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).step);
      expect(steps.at(-1)).toBe(3);
    },
    patient(150_000),
  );

  it(
    'sft --db: exports the accepted samples of a rollout as openai_format and trains on them',
    async () => {
      const runDir = path.join(dir, 'sft-run');
      const db = path.join(dir, 'full', 'polar.db');
      const { stdout } = await run(process.execPath, sftArgs('--db', db, '--min-reward', '1', '--steps', '2', '--run-dir', runDir, '--json'), {
        env: envWithFakes(),
        timeout: patient(120_000),
      });
      expect(JSON.parse(stdout)).toMatchObject({ ok: true, steps: 2 });
      const examples = fs
        .readFileSync(path.join(runDir, 'sft.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(examples.length).toBe(4); // task b's samples earned 1: two in each of the two steps
      // Four examples: the batch is lowered from 32 to 4 (the stand-in, like NeMo-RL, drops an incomplete batch).
      expect(getKey(parseYaml(fs.readFileSync(path.join(runDir, 'sft.yaml'), 'utf8')), 'policy.train_global_batch_size')).toBe(4);
      for (const e of examples) expect(e.messages.at(-1).role).toBe('assistant');
    },
    patient(150_000),
  );
});
