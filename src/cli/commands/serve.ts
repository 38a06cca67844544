import os from 'node:os';
import path from 'node:path';
import chalk from 'chalk';
import type { Command } from 'commander';
import { cannotReach, MODELS_TIMEOUT_MS } from '../../capture/open.js';
import { PolarError } from '../../core/errors.js';
import { HttpGuard, isLoopbackHost } from '../../core/http/guard.js';
import type { RolloutConfig } from '../../rollout/config.js';
import { environmentNotice } from '../../rollout/environments/choose.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';
import { LocalBackend } from '../../serve/local-backend.js';
import { QueueBackend } from '../../serve/queue-backend.js';
import { RolloutService } from '../../serve/service.js';
import { startServeServer } from '../../serve/server.js';
import { sandboxNotices } from '../../sandbox/index.js';
import { openStore } from '../../store/open.js';
import { isPostgresUrl, redactUrl } from '../../store/postgres/url.js';
import { defaultDbPath } from '../../store/store.js';
import { sourceAllowList } from '../../train/gym-agent/allow-from.js';
import { createUpstream } from '../../upstream/create.js';
import { describeSampling, samplingPolicy } from '../../upstream/sampling-policy.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { integerArg, secondsArg } from '../numbers.js';
import { action } from '../output.js';
import { addSandboxOptions, limitsFrom, readOnlyFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import { addUpstreamOptions, upstreamOptionsFrom, type UpstreamFlags } from '../upstream-options.js';

interface ServeOptions extends UpstreamFlags, SandboxFlags {
  host: string;
  port: number;
  allowFrom?: string[];
  allowHost?: string[];
  upstream?: string;
  model?: string;
  contextWindow?: number;
  concurrency: number;
  initWorkers: number;
  postWorkers: number;
  timeout: number;
  db?: string;
  out?: string;
  keepWorkspaces?: boolean;
  keepCompaction?: boolean;
  harnessBin?: string;
  node?: string;
  environment?: EnvironmentName;
  queue?: string;
  runtimeFiles?: string;
  retries: number;
  heartbeat: number;
  json?: boolean;
}

export function registerServe(program: Command): void {
  const serve = program
    .command('serve')
    .description(
      "the rollout service NVIDIA Polar's trainer bridges call (Slime, Miles): POST /rollout/task/submit a TaskRequest, GET /rollout/task/{id} its TaskStatus, the TaskResult POSTed to its callback_url",
    )
    .option('--port <n>', 'port (0: any free port; the printed URL names it)', integerArg('--port', 0, 65535), 18080)
    .option('--host <host>', 'address to bind; beyond loopback needs --allow-from (the bridges send no token)', '127.0.0.1')
    .option(
      '--allow-from <address|subnet|host...>',
      "answer only calls from these source addresses (and this machine): the trainer's nodes; required to bind beyond loopback",
    )
    .option('--allow-host <name...>', 'host names callers may reach the server by, besides its address and loopback names')
    .option('--upstream <url>', 'inference server base URL (the policy)');
  addUpstreamOptions(serve)
    .option('--model <name>', "model to serve every call with (default: the upstream's first)")
    .option(
      '--context-window <tokens>',
      "the served model's context length, as every harness is told it (default: the upstream's max_model_len)",
      integerArg('--context-window', 1, 100_000_000),
    )
    .option('--concurrency <k>', 'harness sessions at once, over all tasks (RUNNING workers)', integerArg('--concurrency', 1, 1024), 4)
    .option('--init-workers <i>', 'workspaces prepared at once', integerArg('--init-workers', 1, 1024), 2)
    .option('--post-workers <p>', 'evaluations at once', integerArg('--post-workers', 1, 1024), 2)
    .option(
      '--timeout <seconds>',
      "the agent's own budget, from its start, when a task's metadata.agent_timeout gives none (timeout_seconds bounds the whole session)",
      secondsArg('--timeout'),
      1800,
    )
    .option('--db <file|url>', 'SQLite file (default: $POLAR_DB, else ./polar.db)')
    .option('--out <dir>', 'where workspaces are prepared (default: a new temporary folder)')
    .option('--keep-workspaces', 'keep each workspace after evaluation')
    .option('--keep-compaction', "leave the harness's own compaction on (default: off, so a session is one append-only trace)")
    .option('--harness-bin <path>', 'the harness executable (default: node_modules/.bin, then PATH)')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--queue <url>', "run every task's sessions on `polar worker`s (any machine) through this PostgreSQL queue and shared store, instead of here")
    .option(
      '--retries <n>',
      'with --queue: times a lost or failed session is handed to another worker before it is given up on',
      integerArg('--retries', 0, 100),
      2,
    )
    .option(
      '--heartbeat <seconds>',
      'with --queue: a worker that has not touched its session for this long has lost it (≥ 10)',
      integerArg('--heartbeat', 10, 86_400),
      // A lost sample waits a minute for another worker; a PostgreSQL restart of up to 50 s loses no
      // lease (touched every 10 s: lease.ts BEATS). bench/lease-heartbeat.ts: on the lease thread a
      // touch came at most 0.5 s late on a 2-core machine at load 35, on the main thread 2.7 s.
      60,
    )
    .addOption(environmentOption())
    .option(
      '--runtime-files <dir>',
      "the one folder a request's runtime uploads and harbor tests_dir are read from (default: none are; a submitter may not copy serve's own files into an image)",
    )
    .option('--json', 'print the listening URL as one JSON line');
  addSandboxOptions(serve).action(action(serveCommand));
}

async function serveCommand(opts: ServeOptions): Promise<void> {
  if (opts.queue) {
    if (!isPostgresUrl(opts.queue)) throw new PolarError('POLAR_USAGE', `--queue must be a postgres:// URL (got ${JSON.stringify(opts.queue)})`);
    if (opts.db && opts.db !== opts.queue)
      throw new PolarError('POLAR_USAGE', "with --queue the tasks live in the queue's database: drop --db, or make it the --queue URL");
  } else if (!opts.upstream)
    throw new PolarError('POLAR_USAGE', 'polar serve needs the inference server: --upstream URL (or --queue URL, for workers that have their own)');
  const dbPath = opts.queue ?? opts.db ?? defaultDbPath();
  if (!opts.queue && isPostgresUrl(dbPath))
    throw new PolarError(
      'POLAR_USAGE',
      'polar serve keeps its store in SQLite (--db FILE); a shared store comes with --queue URL, for workers on other machines',
    );
  const allowFrom = opts.allowFrom?.length ? await sourceAllowList(opts.allowFrom) : null;
  if (!isLoopbackHost(opts.host) && !allowFrom)
    throw new PolarError(
      'POLAR_USAGE',
      `polar serve: binding ${opts.host} exposes it beyond this machine; pass --allow-from ADDRESS|SUBNET|HOST (the trainer's nodes: Slime's and Miles' bridges send no token)`,
    );
  const guard = new HttpGuard({ host: opts.host, allowHosts: opts.allowHost ?? [], allowFrom, what: 'polar serve' });
  const sandbox = sandboxKind(opts);
  // A request's runtime image runs in a box only where one was asked for (--environment); else every session runs in the sandbox here.
  const environment = harborEnvironment(opts.environment, opts.environment !== undefined);
  const config = serveConfig(opts, sandbox, environment);
  const notice = (line: string) => process.stderr.write(`${line}\n`);
  if (!opts.json && !opts.queue) {
    for (const line of sandboxNotices({ kind: sandbox, bwrap: '', network: opts.network ?? 'proxy-only', limits: limitsFrom(opts), extraReadOnly: [] }))
      notice(chalk.yellow(`notice: ${line}`));
    const chosen = environmentNotice(opts.environment, environment);
    if (chosen) notice(chalk.yellow(`notice: ${chosen}`));
  }
  const apiKey = process.env.POLAR_UPSTREAM_API_KEY;
  if (!opts.queue) {
    notice(
      chalk.dim(
        `notice: ${describeSampling(samplingPolicy('trainer', config.upstream.kind, config.upstream.temperature, config.upstream.topP, config.upstream.thinking))}`,
      ),
    );
    await checkUpstream(config, apiKey);
  }
  const nodeId = `polar-${os.hostname()}`;
  const backend = opts.queue
    ? await QueueBackend.open({ url: opts.queue, config, settings: { retries: opts.retries, heartbeatSec: opts.heartbeat }, onNotice: notice })
    : new LocalBackend({
        store: await openStore(dbPath, { onNotice: notice }),
        dbPath: path.resolve(dbPath),
        config,
        ...(apiKey ? { upstreamApiKey: apiKey } : {}),
        ...(opts.runtimeFiles ? { runtimeFiles: path.resolve(opts.runtimeFiles) } : {}),
        onNotice: notice,
      });
  const service = new RolloutService({ backend, timeoutSec: config.timeoutSec, nodeId, onNotice: notice });
  let url = '';
  const { server, address } = await startServeServer({ host: opts.host, port: opts.port, guard, service, nodeId, publicUrl: () => url, onNotice: notice });
  // Bound to every address, the URL others reach it by is this machine's name.
  const bound = address.address === '0.0.0.0' || address.address === '::' ? os.hostname() : address.address;
  const host = bound.includes(':') ? `[${bound}]` : bound;
  url = `http://${host}:${address.port}`;
  const db = redactUrl(dbPath);
  if (opts.json)
    process.stdout.write(`${JSON.stringify({ url, db, ...(opts.queue ? { queue: db } : { upstream: opts.upstream, upstreamKind: config.upstream.kind }) })}\n`);
  else if (opts.queue)
    process.stdout.write(
      `${chalk.bold('polar serve')} on ${url}: tasks queued on ${db} for \`polar worker --queue ${db} --harness H --upstream URL\` on each machine\n`,
    );
  else
    process.stdout.write(
      `${chalk.bold('polar serve')} on ${url}: tasks against ${opts.upstream} (${config.upstream.kind}), sandbox ${sandbox}, db ${dbPath}\n`,
    );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  notice('polar serve: stopping: running tasks are cancelled');
  server.close();
  server.closeAllConnections();
  await service.close();
  await backend.store.closeAsync();
}

/**
 * The upstream, checked once before serving as openCapture checks it for every other command
 * (issue 40): serve opens each harness's capture only when its first task comes, so a server that
 * does not answer, or a tokenizer that is not there, would otherwise fail every task later (a
 * `failed` task stops Slime's training) instead of stopping serve now with the cause.
 */
async function checkUpstream(config: Omit<RolloutConfig, 'harness' | 'samples'>, apiKey: string | undefined): Promise<void> {
  const { url, kind, tokenizer, toolParser } = config.upstream;
  const upstream = await createUpstream(kind, {
    baseUrl: url,
    ...(apiKey ? { apiKey } : {}),
    ...(tokenizer ? { tokenizer } : {}),
    ...(toolParser ? { toolParser } : {}),
  });
  try {
    await upstream.models(AbortSignal.timeout(MODELS_TIMEOUT_MS)).catch((err: unknown) => {
      const unreachable = cannotReach(url, err as Error);
      if (unreachable) throw unreachable;
    });
  } finally {
    await upstream.close();
  }
}

/** polar's side of every served task (the harness and group size come from each TaskRequest). */
function serveConfig(opts: ServeOptions, sandbox: 'bwrap' | 'none', environment: EnvironmentName): Omit<RolloutConfig, 'harness' | 'samples'> {
  const upstream = upstreamOptionsFrom(opts);
  if (upstream.tokenizer && !upstream.tokenizer.startsWith('bundled:')) upstream.tokenizer = path.resolve(upstream.tokenizer);
  return {
    ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
    ...(opts.node ? { nodeBin: opts.node } : {}),
    // With --queue each worker's own --upstream is used; the one given here is only recorded.
    upstream: { url: opts.upstream ?? '', kind: opts.upstreamKind, ...upstream },
    model: opts.model ?? null,
    ...(opts.contextWindow ? { contextWindow: opts.contextWindow } : {}),
    concurrency: opts.concurrency,
    initWorkers: opts.initWorkers,
    postWorkers: opts.postWorkers,
    timeoutSec: opts.timeout,
    outDir: path.resolve(opts.out ?? path.join(os.tmpdir(), `polar-serve-${process.pid}`)),
    accept: null,
    keepWorkspaces: opts.keepWorkspaces === true,
    sandbox,
    ...(opts.network ? { network: opts.network } : {}),
    limits: limitsFrom(opts),
    ...(opts.sandboxRo?.length ? { sandboxReadOnly: readOnlyFrom(opts) } : {}),
    ...(environment !== 'host' ? { environment } : {}),
    ...(opts.keepCompaction ? { compaction: 'harness' as const } : {}),
  };
}
