import { rolloutSampling } from '../../rollout/run-rollout.js';
import { describeSampling } from '../../upstream/sampling-policy.js';
import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { HARNESS_NAMES } from '../../harness/registry.js';
import { sandboxNotices } from '../../sandbox/index.js';
import { sandboxSettings } from '../../rollout/sandboxing.js';
import type { RolloutConfig } from '../../rollout/config.js';
import { addSandboxOptions, limitsFrom, readOnlyFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import { isPostgresUrl, redactUrl } from '../../store/postgres/url.js';
import { integerArg, secondsArg } from '../numbers.js';
import { clip } from '../clip.js';
import { action } from '../output.js';
import { count } from '../plural.js';
import { addUpstreamOptions, UPSTREAM_KINDS_HELP, upstreamOptionsFrom, type UpstreamFlags } from '../upstream-options.js';
import os from 'node:os';
import path from 'node:path';
import { environmentNotice } from '../../rollout/environments/choose.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';

interface WorkerFlags extends UpstreamFlags, SandboxFlags {
  queue: string;
  db?: string;
  harness: string;
  upstream: string;
  model?: string;
  contextWindow?: number;
  concurrency: number;
  timeout: number;
  out?: string;
  command?: string;
  harnessBin?: string;
  node?: string;
  idleExit?: number;
  pgConnections?: number;
  listenUrl?: string;
  keepWorkspaces?: boolean;
  environment?: EnvironmentName;
  json?: boolean;
}

export function registerWorker(program: Command): void {
  const worker = program
    .command('worker')
    .description('take samples of queued rollouts (polar rollout --queue) and run them on this machine, recording into the shared store')
    .requiredOption('--queue <url>', 'postgres://… of the queue (and, unless --db says otherwise, of the shared store)')
    .addOption(
      new Option('--harness <name>', 'the harness this machine runs; it takes only rollouts of that harness').choices([...HARNESS_NAMES]).makeOptionMandatory(),
    )
    .requiredOption('--upstream <url>', "this machine's inference server base URL");
  addUpstreamOptions(worker)
    .option('--model <name>', "model to serve every call with (default: the upstream's first)")
    .option(
      '--context-window <tokens>',
      "the served model's context length (default: the upstream's max_model_len; with neither, the worker refuses to start; a rollout's own --context-window wins)",
      integerArg('--context-window', 1, 100_000_000),
    )
    .option('--concurrency <k>', 'samples at once on this machine', integerArg('--concurrency', 1, 1024), 2)
    .option('--timeout <seconds>', "the agent's budget, from its start, when its task gives none", secondsArg('--timeout'), 600)
    .option('--db <url>', 'the shared store (default: the --queue URL)')
    .option(
      '--pg-connections <n>',
      "PostgreSQL connections of this worker's one pool for its store, ledger and queue (default: $POLAR_PG_POOL, else 4); it also holds one LISTEN connection and, while it runs samples, one heartbeat connection; a --queue in another database than --db gets a pool of as many again",
      integerArg('--pg-connections', 1, 1000),
    )
    .option(
      '--listen-url <url>',
      "postgres://… straight to the store's PostgreSQL for the one connection that LISTENs (fleet pause, jobs queued), when --db/--queue go through PgBouncer in transaction mode (default: $POLAR_LISTEN_URL, else --db)",
    )
    .option('--out <dir>', 'where workspaces and evaluators work (default: a new temporary folder)');
  addSandboxOptions(worker)
    .option('--command <template>', 'for --harness custom (see polar run --help)')
    .option('--harness-bin <path>', 'the harness executable (default: node_modules/.bin, then PATH)')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--keep-workspaces', 'keep each workspace after evaluation (default: removed)')
    .addOption(environmentOption())
    .option('--idle-exit <seconds>', 'exit once the queue has had nothing for this worker this long (default: run until Ctrl-C)', secondsArg('--idle-exit'))
    .option('--json', 'one JSON line per finished sample, and a summary line at the end')
    .addHelpText(
      'after',
      `
Start one worker per machine (or several on a big one), all pointed at the same PostgreSQL:
  polar worker --queue postgres://polar@db-host/polar --harness claude-code --upstream http://127.0.0.1:8000 --concurrency 4
Connections to PostgreSQL per worker, at most: --pg-connections (4) + 1 LISTEN + 1 heartbeat while it
holds samples, when --queue and --db are one database (2 × --pg-connections + 2 otherwise); idle pool
connections close after 30 s, so an idle worker holds 2 at most (its LISTEN, and one pooled connection its
30 s looks keep open). It wakes on a NOTIFY when a rollout is queued,
else looks every 30 s at most (POLAR_QUEUE_POLL_MAX_S), and expires lost leases every 30 s
(POLAR_QUEUE_SUPERVISE_S) while any sample is out on a lease. Behind PgBouncer in transaction mode,
give --listen-url a direct URL: without one the worker still runs, but hears no fleet pause or NOTIFY.
Calls are recorded into this machine's journal first (as fast as a local file) and shipped to the
shared store in the background; a killed worker's sample goes back to the queue and runs elsewhere.

Environment:
  POLAR_STATE_DIR         this machine's state: the journal (journal-<id>.db: calls not yet shipped, and
                          rows PostgreSQL refused: polar db set-aside) and the task content cache
                          (content/). One per machine, on a local disk that outlives the worker; default
                          $XDG_STATE_HOME/polar or ~/.local/state/polar. Rows still in it when the machine
                          is lost for good stay on its disk: mount its state folder on another
                          machine and ship them with POLAR_STATE_DIR=<that folder> polar db ship --db URL.
  POLAR_UPSTREAM_API_KEY  the inference server's key (never stored)
  POLAR_PG_POOL, POLAR_LISTEN_URL, POLAR_PG_RETRY_S (how long a PostgreSQL restart is waited out, 300),
  POLAR_CONTENT_MAX_MB (the largest task content this worker fetches, 256)
${UPSTREAM_KINDS_HELP}`,
    )
    .action(action(workerCommand));
}

async function workerCommand(opts: WorkerFlags): Promise<void> {
  if (!isPostgresUrl(opts.queue)) throw new PolarError('POLAR_USAGE', `--queue must be a postgres:// URL (got ${JSON.stringify(opts.queue)})`);
  const dbUrl = opts.db ?? opts.queue;
  if (!isPostgresUrl(dbUrl))
    throw new PolarError('POLAR_USAGE', '--db for a worker is the shared store: a postgres:// URL that every worker and the rollout use');
  const listenUrl = opts.listenUrl ?? (process.env.POLAR_LISTEN_URL || undefined);
  if (listenUrl !== undefined && !isPostgresUrl(listenUrl))
    throw new PolarError(
      'POLAR_USAGE',
      `--listen-url (or POLAR_LISTEN_URL) must be a postgres:// URL straight to the store's PostgreSQL (got ${JSON.stringify(redactUrl(listenUrl))})`,
    );
  const sandbox = sandboxKind(opts);
  // Like the sandbox, this machine's own: the queue may hand it Harbor tasks at any time.
  const environment = harborEnvironment(opts.environment, true);
  const { runWorker } = await import('../../rollout/queue/worker.js');
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const say = (line: string) => process.stderr.write(`${line}\n`);
  if (!opts.json)
    say(`${chalk.bold('polar worker')} ${os.hostname()}/${process.pid}: ${opts.harness} × ${opts.concurrency} from ${redactUrl(opts.queue)}; Ctrl-C to stop`);
  let done = 0;
  try {
    const config: RolloutConfig = {
      harness: opts.harness,
      ...(opts.command !== undefined ? { command: opts.command } : {}),
      ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
      ...(opts.node ? { nodeBin: opts.node } : {}),
      upstream: { url: opts.upstream, kind: opts.upstreamKind, ...upstreamOptionsFrom(opts) },
      model: opts.model ?? null,
      ...(opts.contextWindow ? { contextWindow: opts.contextWindow } : {}),
      samples: 1,
      concurrency: opts.concurrency,
      initWorkers: opts.concurrency,
      postWorkers: opts.concurrency,
      timeoutSec: opts.timeout,
      outDir: path.resolve(opts.out ?? path.join(os.tmpdir(), `polar-worker-${process.pid}`)),
      accept: null,
      keepWorkspaces: opts.keepWorkspaces === true,
      sandbox,
      ...(opts.network ? { network: opts.network } : {}),
      limits: limitsFrom(opts),
      ...(opts.sandboxRo?.length ? { sandboxReadOnly: readOnlyFrom(opts) } : {}),
      ...(environment !== 'host' ? { environment } : {}),
    };
    if (!opts.json) for (const line of sandboxNotices(sandboxSettings(config, ''))) say(chalk.yellow(`notice: ${line}`));
    if (!opts.json) say(chalk.dim(`notice: ${describeSampling(rolloutSampling(config))}`));
    const chosen = environmentNotice(opts.environment, environment);
    if (chosen && !opts.json) say(chalk.yellow(`notice: ${chosen}`));
    const ran = await runWorker({
      queueUrl: opts.queue,
      dbUrl,
      config,
      ...(process.env.POLAR_UPSTREAM_API_KEY ? { upstreamApiKey: process.env.POLAR_UPSTREAM_API_KEY } : {}),
      idleExitMs: opts.idleExit !== undefined ? opts.idleExit * 1000 : null,
      ...(opts.pgConnections !== undefined ? { pgConnections: opts.pgConnections } : {}),
      ...(listenUrl ? { listenUrl } : {}),
      signal: controller.signal,
      onNotice: say,
      onEvent: (e) => {
        if (e.type !== 'done') return;
        done++;
        if (opts.json) process.stdout.write(`${JSON.stringify(e)}\n`);
        else say(`  ${e.sampleId} ${e.outcome}${e.reward !== null ? ` reward ${e.reward}` : ''}${e.error ? chalk.dim(` ${clip(e.error, 240)}`) : ''}`);
      },
    });
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: true, taken: ran, ended: done })}\n`);
    else say(`polar worker: took ${count(ran, 'sample')}, ${done} ended here`);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}
