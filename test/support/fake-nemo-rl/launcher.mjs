// A stand-in for NeMo-RL's entry points, for tests only: what `uv run python
// examples/nemo_gym/run_grpo_nemo_gym.py --config FILE` and `examples/run_sft.py` do as far as
// polar can see. It loads the generated config with NeMo-RL's merge rule (defaults, _override_) and
// fails on any key the pinned list (fixtures/nemo-rl/contract.json, read from NeMo-RL's source)
// says the run reads unguarded and the merged config lacks, as NeMo-RL's setup() would; it asserts
// what NeMo-RL asserts of the config, drops an incomplete SFT batch as NeMo-RL does, starts a policy
// server (polar's mock in --nemo-rl mode) and the agent the way NeMo Gym starts one (app.py with
// NEMO_GYM_CONFIG_DICT / NEMO_GYM_CONFIG_PATH), posts prompts × group-size rows to /run per step,
// checks NeMo-RL's contiguity rule on every answer, prints NeMo-RL's own progress lines, writes
// step_N checkpoints, resumes from the newest, and stops on SIGINT. Nothing is trained.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

const repo = path.resolve(import.meta.dirname, '../../..');
const { parseYaml, toYaml } = await import(path.join(repo, 'dist/train/yaml.js'));
const { loadWithInheritance } = await import(path.join(repo, 'dist/train/nemo-rl/merge.js'));
const { failedAsserts, loadContract, missingKeys } = await import(path.join(repo, 'dist/train/nemo-rl/contract.js'));
const [script, ...rest] = process.argv.slice(2);
const configFile = rest[rest.indexOf('--config') + 1];
const config = parseYaml(fs.readFileSync(configFile, 'utf8'));
const started = Date.now();
const { perAgentMetrics, stepAdvantages } = await import('./gym-step.mjs');
const { appendTensorboardStep } = await import('../tensorboard-events.mjs');
const children = [];
const stop = (code) => {
  for (const c of children) c.kill('SIGTERM');
  process.exit(code);
};
process.on('SIGINT', () => {
  console.log('\nInterrupted: stopping.');
  stop(130);
});
const fail = (message) => {
  console.log(`AssertionError: ${message}`);
  stop(1);
};
const get = (dotted) => dotted.split('.').reduce((node, k) => (node && typeof node === 'object' ? node[k] : undefined), config);

if (!fs.existsSync(config.defaults)) fail(`defaults ${config.defaults} does not exist`);
// The keys NeMo-RL reads unguarded on this run's path, after its own merge (as a KeyError in setup()).
const kind = script.includes('run_sft') ? 'sft' : 'grpo';
const merged = loadWithInheritance(configFile, (f) => fs.readFileSync(f, 'utf8'));
const missing = missingKeys(kind, loadContract(), merged);
for (const { key, at } of missing) console.log(`KeyError: '${key.split('.').at(-1)}' (${key}, read at ${at})`);
if (missing.length > 0) stop(1);
for (const failed of failedAsserts(kind, loadContract(), merged)) fail(failed);
const checkpoints = get('checkpointing.checkpoint_dir');
const done = fs.existsSync(checkpoints) ? fs.readdirSync(checkpoints).map((d) => Number(/^step_(\d+)$/.exec(d)?.[1] ?? 0)) : [];
const resumeFrom = Math.max(0, ...done);
const savePeriod = get('checkpointing.save_period') ?? 10;
const maxSteps = get(script.includes('run_sft') ? 'sft.max_num_steps' : 'grpo.max_num_steps');
console.log(`Loaded configuration from: ${rest[rest.indexOf('--config') + 1]}`);
console.log(`📊 Using log directory: ${get('logger.log_dir')}/exp_001`);

/** What NeMo-RL's logger would record for a step, `train/`-prefixed (grpo.py:3762), one JSON line a step. */
function logMetrics(step, metrics) {
  const dir = path.join(get('logger.log_dir'), 'exp_001');
  fs.mkdirSync(dir, { recursive: true });
  const train = Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`train/${k}`, v]));
  fs.appendFileSync(path.join(dir, 'logged_metrics.jsonl'), `${JSON.stringify({ step, ...train })}\n`);
  // As NeMo-RL's TensorboardLogger writes them (polar's config enables it): polar train reads these.
  fs.mkdirSync(path.join(dir, 'tensorboard'), { recursive: true });
  appendTensorboardStep(path.join(dir, 'tensorboard', 'events.out.tfevents.0.stand-in'), step, train);
}

function checkpoint(step) {
  if (step % savePeriod !== 0 && step !== maxSteps) return;
  console.log(`Saving checkpoint for step ${step}...`);
  fs.mkdirSync(path.join(checkpoints, `step_${step}`), { recursive: true });
  fs.writeFileSync(path.join(checkpoints, `step_${step}`, 'training_info.json'), JSON.stringify({ step }));
}

// `adv`: a GRPO step's advantages (gym-step.mjs): the loss is 0 when none in the loss is non-zero.
function results(step, rewards, seconds, adv = null) {
  console.log('\n📊 Training Results:');
  console.log(`  • Loss: ${(adv?.allZero ? 0 : 0.5 / step).toFixed(4)}`);
  if (rewards) console.log(`  • Avg Reward: ${(rewards.reduce((a, b) => a + b, 0) / rewards.length).toFixed(4)}`);
  console.log('  • Mean Generation Length: 42.0000');
  console.log('\n⏱️  Timing:');
  console.log(`  • Total step time: ${seconds.toFixed(2)}s`);
}

// NeMo-RL's banners: `Epoch e/E` as an epoch starts (or a resumed one goes on), then `Step k/M`
// counting within the epoch, k from 1 again each epoch, M = min(batches per epoch, max_num_steps)
// (grpo.py:2803, 2823, 3812; sft.py:435, 439, 673 at 7ea279a). Checkpoints take the global step.
function banner(step, perEpoch) {
  const inEpoch = (step - 1) % perEpoch;
  const epochs = get(script.includes('run_sft') ? 'sft.max_num_epochs' : 'grpo.max_num_epochs');
  if (inEpoch === 0 || step === resumeFrom + 1) console.log(`\n${'='.repeat(25)} Epoch ${Math.floor((step - 1) / perEpoch) + 1}/${epochs} ${'='.repeat(25)}`);
  console.log(`\n${'='.repeat(25)} Step ${inEpoch + 1}/${Math.min(perEpoch, maxSteps)} ${'='.repeat(25)}`);
}

function setupComplete() {
  console.log('='.repeat(60));
  console.log(`${' '.repeat(18)}SETUP COMPLETE`);
  console.log(`  Total setup time: ${((Date.now() - started) / 1000).toFixed(1)}s`);
  console.log('='.repeat(60));
  if (resumeFrom > 0) console.log(`Resuming from step ${resumeFrom}`);
}

if (script.includes('run_sft')) {
  const data = get('data.train.data_path');
  if (get('data.train.dataset_name') !== 'openai_format') fail('data.train.dataset_name must be openai_format');
  const rows = fs
    .readFileSync(data, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  for (const row of rows) if (row.messages.at(-1).role !== 'assistant') fail('each row must end with an assistant message');
  setupComplete();
  // drop_last=True with batch_size = train_global_batch_size (sft.py:159-166): whole batches only.
  const perEpoch = Math.floor(rows.length / get('policy.train_global_batch_size'));
  if (perEpoch === 0) {
    console.log(`\n${'='.repeat(25)} Epoch 1/${get('sft.max_num_epochs')} ${'='.repeat(25)}`);
    stop(0);
  }
  for (let step = resumeFrom + 1; step <= maxSteps; step++) {
    banner(step, perEpoch);
    console.log('▶ Preparing batch...');
    console.log('▶ Taking a training step...');
    results(step, null, 0.01);
    checkpoint(step);
  }
  stop(0);
}

// GRPO with NeMo Gym: NeMo-RL's asserts on the config.
if (get('env.should_use_nemo_gym') !== true) fail('should_use_nemo_gym(config)');
if (get('policy.generation.vllm_cfg.async_engine') !== true || get('policy.generation.vllm_cfg.expose_http_server') !== true)
  fail('NeMo-Gym needs async_engine and expose_http_server');
if (get('grpo.max_val_samples') !== null) fail('A non-null `grpo.max_val_samples` parameter is not supported.');
const P = get('grpo.num_prompts_per_step');
const G = get('grpo.num_generations_per_prompt');
if (get('policy.train_global_batch_size') % G !== 0) fail('NeMo-Gym rollout batch size must be divisible by num_generations');
const rows = fs
  .readFileSync(get('data.train.data_path'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));

// The policy server: polar's mock of NeMo-RL's vLLM HTTP server, with the scripted tasks of the
// task file the agent runs (rows carry only a task_id; app.py names the file with --tasks).
const agentConfig = get('env.nemo_gym.config_paths').find((p) => p.endsWith('polar_agent.yaml'));
if (!agentConfig || !fs.existsSync(agentConfig)) fail('the agent config is not in env.nemo_gym.config_paths');
const agentYaml = parseYaml(fs.readFileSync(agentConfig, 'utf8'));
const agentName = Object.keys(agentYaml)[0];
const agentDir = path.join(process.env.NEMO_GYM_EXTRA_ROOTS, 'responses_api_agents', agentName);
const appArgv = JSON.parse(/os\.execv\([^,]+, (\[.*\])\)/.exec(fs.readFileSync(path.join(agentDir, 'app.py'), 'utf8'))[1]);
const tasksFile = appArgv[appArgv.indexOf('--tasks') + 1];
if (appArgv.indexOf('--tasks') < 0 || !fs.existsSync(tasksFile)) fail('app.py starts the agent without --tasks FILE');
const temperature = get('policy.generation.temperature');
// grpo_math_1B.yaml sets max_new_tokens to ${policy.max_total_sequence_length}; polar leaves it to the base.
const maxNewTokens =
  typeof get('policy.generation.max_new_tokens') === 'number' ? get('policy.generation.max_new_tokens') : get('policy.max_total_sequence_length');
const gymRun = loadContract().gym_run;
const topP = get('policy.generation.top_p');
const policy = await startJson(process.execPath, [
  path.join(repo, 'bin/polar.js'),
  'mock-server',
  '--nemo-rl',
  '--nemo-rl-temperature',
  String(temperature),
  '--nemo-rl-top-p',
  String(topP),
  '--port',
  '0',
  '--json',
  '--tasks',
  tasksFile,
]);

// NeMo Gym: the agent's folder under NEMO_GYM_EXTRA_ROOTS, started as `python app.py`.
if (!fs.existsSync(path.join(agentDir, 'requirements.txt')) || !fs.existsSync(path.join(process.env.NEMO_GYM_EXTRA_ROOTS, 'pyproject.toml')))
  fail('the agent folder is not a Gym server folder');
const port = await freePort();
// As Gym does: a server whose config names no host gets default_host, which NeMo-RL sets to the
// node's IP (Gym c3bac96 global_config.py:455-456; NeMo-RL 7ea279a nemo_gym.py:573).
const agentEntry = agentYaml[agentName].responses_api_agents[agentName];
const host = agentEntry.host || nodeIp();
const gymConfig = {
  policy_base_url: [`${policy.url}/v1`],
  policy_api_key: 'dummy_key',
  policy_model_name: get('policy.model_name'),
  default_host: nodeIp(),
  [agentName]: { responses_api_agents: { [agentName]: { ...agentEntry, host, port } } },
};
const agent = spawn('bash', ['-c', `cd ${agentDir} && python3 app.py`], {
  env: { ...process.env, NEMO_GYM_CONFIG_DICT: toYaml(gymConfig), NEMO_GYM_CONFIG_PATH: agentName },
  stdio: ['ignore', 'inherit', 'inherit'],
});
children.push(agent);
const agentUrl = `http://${host}:${port}`;
// Until it answers, or exits: no count of tries, so a busy machine is slow here, never failing (the
// test's own timeout is the safety net).
for (;;) {
  if (agent.exitCode !== null || agent.signalCode !== null) fail(`the agent exited (${agent.exitCode ?? agent.signalCode}) before it answered GET /`);
  try {
    await fetch(`${agentUrl}/`);
    break;
  } catch {
    await new Promise((r) => setTimeout(r, 100));
  }
}
console.log('All 1 / 1 servers ready! Polling every 60s');
setupComplete();

const perEpoch = Math.floor(rows.length / P);
for (let step = resumeFrom + 1; step <= maxSteps; step++) {
  const t0 = Date.now();
  banner(step, perEpoch);
  console.log('▶ Preparing batch...');
  const first = ((step - 1) % perEpoch) * P;
  const batch = rows.slice(first, first + P).flatMap((row) => Array.from({ length: G }, () => structuredClone(row)));
  // What NeMo-RL adds to each row (rollouts.py:2231-2244): sampling params, the output cap and the row index.
  batch.forEach((row, i) => {
    const cap = row.responses_create_params?.max_output_tokens;
    Object.assign(row, {
      _rowidx: i,
      responses_create_params: {
        ...row.responses_create_params,
        temperature,
        top_p: topP,
        max_output_tokens: cap == null ? maxNewTokens : Math.min(cap, maxNewTokens),
      },
    });
  });
  console.log(`▶ Generating responses for batch of size ${batch.length}...`);
  const answers = await Promise.all(
    batch.map(async (row) => {
      // Ctrl-C reaches the whole process group at once: the agent server may be gone before this
      // process runs its own SIGINT handler, which then stops it (as NeMo-RL's does).
      const res = await fetch(`${agentUrl}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(row) }).catch(
        async (err) => {
          await new Promise((r) => setTimeout(r, 2000));
          throw err;
        },
      );
      if (res.status !== 200) {
        // As nemo_gym.py:697-710 (7ea279a): the answer's body printed as "EXCEPTION RESULT", then raised.
        console.error('EXCEPTION RESULT', await res.text());
        fail(`/run answered ${res.status}`);
      }
      return res.json();
    }),
  );
  console.log('▶ Processing rewards...,');
  for (const a of answers) {
    if (typeof a.reward !== 'number' || !Array.isArray(a.response?.output)) fail('a /run result without reward or response.output');
    // Every answer field the pinned list says NeMo-RL reads unguarded (nemo_gym.py:765-830, rollouts.py:2784).
    for (const f of gymRun.response.filter((f) => f.required)) {
      if (f.field.split('.').reduce((node, k) => (node && typeof node === 'object' ? node[k] : undefined), a) === undefined)
        fail(`KeyError: '${f.field}' in the /run answer (${f.file}:${f.line})`);
    }
    let seen = [];
    let trainable = 0;
    for (const item of a.response.output) {
      if (!item.generation_token_ids?.length) continue;
      trainable++;
      if (seen.some((id, i) => item.prompt_token_ids[i] !== id)) fail('Non-contiguous messages found! This may be a tokenization issue');
      seen = [...item.prompt_token_ids, ...item.generation_token_ids];
    }
    if (trainable === 0) fail('NeMo Gym returned a result with no generation data.');
  }
  console.log('▶ Computing advantages...');
  // NeMo-RL's rule (first-prompt groups, leave-one-out, normalisation, masks): gym-step.mjs.
  const adv = stepAdvantages(answers, get);
  logMetrics(step, { ...adv.stats, ...perAgentMetrics(batch, answers) });
  console.log('▶ Training policy...');
  results(
    step,
    answers.map((a) => a.reward),
    (Date.now() - t0) / 1000,
    adv,
  );
  checkpoint(step);
}
stop(0);

/** Starts a command that prints one JSON line with its URL, and resolves with it. */
function startJson(file, args) {
  const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line)));
    child.once('exit', (code) => reject(new Error(`${args[1]} exited ${code}`)));
  });
}

/** This machine's first non-loopback IPv4 address, as NeMo-RL's `node_ip` (127.0.0.1 when it has none). */
function nodeIp() {
  for (const list of Object.values(os.networkInterfaces())) for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) return i.address;
  return '127.0.0.1';
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
