import { getHarness } from '../../harness/registry.js';
import { compactionNotice } from '../../rollout/sample-mask.js';
import { describeSampling, samplingPolicy, type ThinkingSetting } from '../../upstream/sampling-policy.js';
import { addTrainerSamplingOptions } from '../upstream-options.js';
import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { HARNESS_NAMES } from '../../harness/registry.js';
import { sandboxNotices } from '../../sandbox/index.js';
import { addSandboxOptions, limitsFrom, readOnlyFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import { loadTasks } from '../../rollout/load-tasks.js';
import { harborPreflight } from '../../rollout/harbor/trial.js';
import { isLoopbackHost } from '../../core/http/guard.js';
import { sourceAllowList } from '../../train/gym-agent/allow-from.js';
import {
  DEFAULT_FAILURE_WINDOW,
  DEFAULT_INFRA_RETRIES,
  DEFAULT_MAX_FAILED_SHARE,
  defaultAgentOutDir,
  gymEnvironment,
  startGymAgent,
} from '../../train/gym-agent/agent.js';
import { UPSTREAM_KINDS } from '../../upstream/types.js';
import { defaultDbPath } from '../../store/store.js';
import { integerArg, numberArg, secondsArg } from '../numbers.js';
import { action } from '../output.js';
import { count } from '../plural.js';
import { environmentNotice } from '../../rollout/environments/choose.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { REWARD_RANGE_HELP, rewardKeyArg, rewardRangeArg } from './rollout/flags.js';

interface GymAgentCommandOptions extends SandboxFlags {
  harness: string;
  port: number;
  host: string;
  upstream?: string[];
  upstreamKind: string;
  tokenizer?: string;
  model?: string;
  contextWindow?: number;
  temperature?: number;
  topP?: number;
  thinking?: ThinkingSetting;
  db?: string;
  concurrency: number;
  timeout: number;
  out?: string;
  command?: string;
  harnessBin?: string;
  node?: string;
  fromGym?: boolean;
  exitWithParent?: boolean;
  tasks?: string;
  allowInlineTasks?: boolean;
  authToken?: string;
  allowHost?: string[];
  allowFrom?: string[];
  infraRetries: number;
  maxFailedShare: number;
  failureWindow: number;
  maxMaskedShare?: number;
  environment?: EnvironmentName;
  rewardKey?: string;
  rewardRange?: [number, number];
  json?: boolean;
}

export function registerGymAgent(program: Command): void {
  const gymAgent = program
    .command('gym-agent')
    .description(
      "serve NeMo Gym's agent contract for NeMo-RL: each POST /run row runs one harness session through polar and answers with token fields and the reward",
    )
    .addOption(new Option('--harness <name>', 'the harness every session runs').choices([...HARNESS_NAMES]).makeOptionMandatory())
    .option('--port <n>', 'port (0: any free port)', integerArg('--port', 0, 65535), 0)
    .option('--host <host>', 'address to bind; non-loopback needs --allow-from or --auth-token', '127.0.0.1')
    .option('--tasks <path>', 'the rollout task file (JSONL), or a Harbor task folder or a folder of them: /run rows name one of its tasks by "task_id"')
    .addOption(environmentOption())
    .option('--reward-key <name>', "the metric of a Harbor verifier's reward.json that is the reward, as polar rollout --reward-key", rewardKeyArg)
    .option('--reward-range <lo,hi>', `${REWARD_RANGE_HELP}, as polar rollout --reward-range`, rewardRangeArg)
    .option('--allow-inline-tasks', 'also run rows that define their task inline ("task"); they come from the network, so they run only sandboxed')
    .option(
      '--auth-token <token>',
      'require this token (Authorization: Bearer, or x-polar-auth-token) on every request but GET / (default: $POLAR_AUTH_TOKEN, except with --from-gym)',
    )
    .option(
      '--allow-from <address|subnet|host...>',
      'answer only calls from these source addresses (and this machine): the trainer node, whose NeMo Gym sends /run no token; with --auth-token both are required',
    )
    .option(
      '--allow-host <name...>',
      'host names callers may reach the agent by, besides its address and loopback names (DNS-rebinding protection refuses others)',
    )
    .option('--upstream <url...>', "the policy server(s) (NeMo-RL's vLLM HTTP server, …/v1); under NeMo Gym, its policy_base_url")
    .addOption(new Option('--upstream-kind <kind>', 'how to talk to it (see polar proxy --help)').choices([...UPSTREAM_KINDS]).default('nemo-rl'))
    .option('--tokenizer <path>', 'for vllm-tito / sglang-tito')
    .option('--model <name>', "the served model (NeMo-RL's server lists none; under NeMo Gym, its policy_model_name)")
    .option(
      '--context-window <tokens>',
      "the policy's context length (default: the server's max_model_len for --model; NeMo-RL's server lists none, so polar train grpo passes it)",
      integerArg('--context-window', 1, 100_000_000),
    );
  addTrainerSamplingOptions(
    gymAgent,
    "the trainer's temperature, pinned on every call whose row gives none (default 1.0, NeMo-RL's; polar train grpo passes policy.generation.temperature)",
  )
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--concurrency <k>', 'harness sessions at once; other rows wait', integerArg('--concurrency', 1, 1024), 4)
    .option('--timeout <seconds>', "the agent's budget, from its start, when its task gives none", secondsArg('--timeout'), 1800)
    .option('--out <dir>', 'where workspaces are prepared (default: a temporary folder)')
    .option('--command <template>', 'for --harness custom')
    .option('--harness-bin <path>', 'the harness executable')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--from-gym', 'started by NeMo Gym: host, port, policy URL and model from NEMO_GYM_CONFIG_DICT')
    .option(
      '--infra-retries <n>',
      'run a row again this many times when its workspace, setup or harness start fails, before answering it masked',
      integerArg('--infra-retries', 0, 100),
      DEFAULT_INFRA_RETRIES,
    )
    .option(
      '--max-failed-share <f>',
      'answer /run with HTTP 400 (NeMo-RL stops) once more than this share of the last --failure-window rows failed outside the policy; 1 never stops',
      numberArg('--max-failed-share', 0, 1),
      DEFAULT_MAX_FAILED_SHARE,
    )
    .option(
      '--max-masked-share <f>',
      "answer /run with HTTP 400 (NeMo-RL stops) once more than this share of a step's rows (--failure-window) was masked; default: only warn (above 0.25)",
      numberArg('--max-masked-share', 0, 1),
    )
    .option(
      '--failure-window <rows>',
      'rows the share is taken over: about one NeMo-RL step (prompts × group size)',
      integerArg('--failure-window', 1, 1_000_000),
      DEFAULT_FAILURE_WINDOW,
    )
    .option('--exit-with-parent', 'exit when the process that started this one is gone (Gym stops servers by signalling their launcher)')
    .option('--json', 'print the listening URL as one JSON line');
  addSandboxOptions(gymAgent).action(action(serve));
}

async function serve(opts: GymAgentCommandOptions): Promise<void> {
  const gym = opts.fromGym ? gymEnvironment() : null;
  const upstreams = opts.upstream ?? gym?.policyBaseUrls ?? [];
  if (upstreams.length === 0) throw new PolarError('POLAR_USAGE', 'gym-agent needs the policy server: --upstream URL (or --from-gym, under NeMo Gym)');
  const sandbox = sandboxKind(opts);
  for (const line of sandboxNotices({ kind: sandbox, bwrap: '', network: opts.network ?? 'proxy-only', limits: limitsFrom(opts), extraReadOnly: [] }))
    process.stderr.write(chalk.yellow(`notice: ${line}\n`));
  const tasks = opts.tasks ? loadTasks(opts.tasks, (line) => process.stderr.write(chalk.yellow(`${line}\n`))) : null;
  for (const line of harborPreflight(tasks ?? [], sandbox)) process.stderr.write(chalk.yellow(`${line}\n`));
  const environment = harborEnvironment(opts.environment, tasks?.some((t) => t.harbor) === true);
  const chosen = environmentNotice(opts.environment, environment);
  if (chosen) process.stderr.write(chalk.yellow(`notice: ${chosen}\n`));
  // Every sample runs append-only (compaction off); what no setting of this harness stops is said now.
  const gap = compactionNotice(getHarness(opts.harness, opts.command !== undefined ? { command: opts.command } : {}), 'off');
  if (gap) process.stderr.write(chalk.yellow(`notice: ${gap}\n`));
  process.stderr.write(
    chalk.dim(
      `notice: ${describeSampling(samplingPolicy('trainer', opts.upstreamKind, opts.temperature, opts.topP, opts.thinking))}; a row's own temperature / top_p (set by NeMo-RL) wins\n`,
    ),
  );
  // Under Gym, $POLAR_AUTH_TOKEN (NeMo-RL hands Gym its whole environment) would lock Gym out: Gym
  // sends /run no token. There the agent stays on loopback instead; only --auth-token sets one.
  const authToken = opts.authToken ?? (opts.fromGym ? null : process.env.POLAR_AUTH_TOKEN || null);
  const allowFrom = opts.allowFrom?.length ? await sourceAllowList(opts.allowFrom) : null;
  if (gym?.host && !isLoopbackHost(gym.host) && !authToken && !allowFrom) {
    // NeMo-RL sets Gym's default_host to the node's IP; Gym sends /run no token, so pin the agent instead.
    throw new PolarError(
      'POLAR_USAGE',
      `NeMo Gym assigned this agent host ${gym.host}, which other machines reach; set host: 127.0.0.1 in the agent's Gym config (polar train grpo does), or pass --allow-from the addresses that may call it`,
    );
  }
  const agent = await startGymAgent({
    harness: opts.harness,
    ...(opts.command !== undefined ? { command: opts.command } : {}),
    ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
    ...(opts.node ? { nodeBin: opts.node } : {}),
    dbPath: opts.db ?? defaultDbPath(),
    host: gym?.host ?? opts.host,
    port: gym?.port ?? opts.port,
    upstreams,
    upstreamKind: opts.upstreamKind,
    ...(opts.tokenizer ? { tokenizer: opts.tokenizer } : {}),
    model: opts.model ?? gym?.policyModel ?? null,
    ...(opts.contextWindow ? { contextWindow: opts.contextWindow } : {}),
    ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    ...(opts.topP !== undefined ? { topP: opts.topP } : {}),
    ...(opts.thinking !== undefined ? { thinking: opts.thinking } : {}),
    concurrency: opts.concurrency,
    timeoutSec: opts.timeout,
    sandbox,
    ...(opts.network ? { network: opts.network } : {}),
    limits: limitsFrom(opts),
    ...(opts.sandboxRo?.length ? { sandboxReadOnly: readOnlyFrom(opts) } : {}),
    environment,
    ...(opts.rewardKey !== undefined ? { rewardKey: opts.rewardKey } : {}),
    ...(opts.rewardRange !== undefined ? { rewardRange: opts.rewardRange } : {}),
    outDir: opts.out ?? defaultAgentOutDir(),
    ...(tasks ? { tasks: { file: opts.tasks!, tasks } } : {}),
    allowInlineTasks: opts.allowInlineTasks === true,
    authToken,
    ...(opts.allowHost ? { allowHosts: opts.allowHost } : {}),
    allowFrom,
    infraRetries: opts.infraRetries,
    maxFailedShare: opts.maxFailedShare,
    failureWindow: opts.failureWindow,
    maxMaskedShare: opts.maxMaskedShare ?? null,
    onNotice: (line) => process.stderr.write(`${line}\n`),
    onRun: (r) =>
      process.stderr.write(
        `polar gym-agent: ${r.polar_session_id ?? '(no session)'} reward ${r.reward}${r.instance_config ? chalk.yellow(` masked: ${r.polar_mask_reason}`) : ''} · ${count(r.polar_calls, 'call')}${(r.polar_attempts ?? 1) > 1 ? ` · ${r.polar_attempts} attempts` : ''}\n`,
      ),
  });
  if (opts.json) process.stdout.write(`${JSON.stringify({ url: agent.url, rolloutId: agent.rolloutId, upstreams, upstreamKind: opts.upstreamKind })}\n`);
  else
    process.stdout.write(
      `${chalk.bold('polar gym-agent')} on ${agent.url} (rollout ${agent.rolloutId}): ${opts.harness} against ${upstreams.join(', ')} (${opts.upstreamKind}), sandbox ${sandbox}\n`,
    );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    if (opts.exitWithParent) {
      const parent = process.ppid;
      setInterval(() => {
        if (process.ppid !== parent) resolve();
      }, 2000).unref();
    }
  });
  await agent.close();
}
