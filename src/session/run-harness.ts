import { PolarError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import { type HarnessExit, runHarnessProcess } from '../core/process/harness-process.js';
import type { RunningProxy } from '../proxy/server.js';
import { tokenizerField } from '../proxy/session-row.js';
import { masterKeyFile, readMaster, SessionKeys } from '../proxy/session-keys.js';
import { checkWorkdir, type Jail, privateSocketPath } from '../sandbox/index.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/store.js';
import type { Upstream } from '../upstream/types.js';
import type { CommandLine } from '../core/process/command-line.js';
import type { HarnessContext } from '../harness/types.js';
import { CallFeed } from './call-feed.js';
import { harnessVersionOf } from './harness-version.js';
import { openHarnessJail } from './jail.js';
import { activeSandbox, type RunHarnessOptions, type RunHarnessResult } from './options.js';
import { type PreparedRun, prepareRun } from './prepare.js';
import { openProxyLink, proxyOrigin, relayToProxy } from './proxy-link.js';

export type { RunHarnessOptions, RunHarnessResult } from './options.js';

/** What a run has opened, closed in `release` however the run ends. */
interface Held {
  store: Store;
  ownsStore: boolean;
  /** The Unix socket made for a proxy-only sandbox when the caller gave none. */
  ownSocket?: { path: string; remove(): Promise<void> };
  upstream?: Upstream;
  proxy?: RunningProxy;
  relay?: { close(): Promise<void> };
  jail?: Jail;
}

/**
 * One harness run, from prompt to captured session: a proxy (or a running one), a session row
 * carrying the harness and its version, a private config directory, the harness process, and the
 * session's end status (`completed`, `failed`, `timeout`, `aborted`).
 */
export async function runHarness(opts: RunHarnessOptions): Promise<RunHarnessResult> {
  const sandboxed = activeSandbox(opts);
  // Before anything is opened or recorded: a working directory the sandbox refuses leaves nothing behind.
  if (sandboxed) checkWorkdir(opts.cwd);
  const run = await prepareRun(opts, opts.session ?? newId('ses'));
  const store = opts.store ?? (await openStore(opts.dbPath, { onNotice: (line) => opts.onNotice?.(line) }));
  // A proxy-only sandbox reaches the proxy through a Unix socket: the caller's, or one made here.
  const ownSocket = sandboxed?.network === 'proxy-only' && !sandboxed.proxySocket ? await privateSocketPath() : undefined;
  const held: Held = { store, ownsStore: !opts.store, ...(ownSocket ? { ownSocket } : {}) };
  try {
    return await captureSession(opts, run, held);
  } finally {
    await release(held);
  }
}

/** The run inside its opened resources: link, record, configure, jail, run, close the session. */
async function captureSession(opts: RunHarnessOptions, run: PreparedRun, held: Held): Promise<RunHarnessResult> {
  const { harness } = opts;
  const { session, logFile } = run;
  const keys = opts.sessionKeys ?? (opts.proxyUrl ? readMaster(masterKeyFile(opts.dbPath)) : SessionKeys.random());
  const feed = opts.onCallRecorded ? new CallFeed(held.store, session, opts.onCallRecorded) : undefined;
  const link = await openProxyLink(opts, session, held.store, keys, held.ownSocket?.path, feedOnCall(opts, feed));
  held.upstream = link.upstream;
  held.proxy = link.proxy;
  const { model, contextWindow } = link;
  if (!model) throw new PolarError('POLAR_USAGE', 'could not learn the served model from the upstream; pass --model NAME');

  // Without a master (an open `polar proxy`), the key only names the session, as it always did.
  const apiKey = keys ? keys.keyFor(session) : `polar-${session}`;
  // With the workspace or home mounted elsewhere inside (a Harbor task's /app, a rollout's fixed
  // paths), the harness is told those paths; polar writes its config at the host's.
  const inside = activeSandbox(opts);
  const ctxBase: Omit<HarnessContext, 'proxyUrl'> = {
    session,
    apiKey,
    model,
    home: inside?.homeInside ?? run.home,
    cwd: inside?.cwdInside ?? opts.cwd,
    hostHome: run.home,
    hostCwd: opts.cwd,
    contextWindow,
    isRoot: process.getuid?.() === 0,
    appendOnly: opts.appendOnly === true,
  };
  const harnessVersion =
    opts.harnessVersion !== undefined
      ? opts.harnessVersion
      : await harnessVersionOf(harness, run.bin, { ...ctxBase, home: run.home, cwd: opts.cwd, proxyUrl: 'http://127.0.0.1:9' }, run.baseEnv);
  recordSession(opts, run, held, harnessVersion, model);
  if (!held.upstream && held.ownSocket) held.relay = await relayToProxy(link.url, held.ownSocket.path);

  const ctx: HarnessContext = { ...ctxBase, proxyUrl: link.url };
  await harness.writeConfig(ctx);
  const plain = harness.command(run.bin, ctx, opts.prompt, opts.extraArgs ?? [], run.baseEnv);
  held.jail = await openHarnessJail(opts, run, link.url, held.ownSocket?.path);
  const { exit, limit } = await superviseHarness(opts, run, held, held.jail ? held.jail.wrap(plain) : plain, feed);
  // In-flight calls finish (or are recorded as aborted) before the session is closed.
  await held.proxy?.close(5000);
  held.proxy = undefined;
  feed?.finish();
  const status = endStatus(exit);
  held.store.sessions.end(session, status);
  return { session, exitCode: exit.exitCode, status, logFile, harnessVersion, summary: held.store.sessions.summary(session), limit };
}

/** The session row: the harness and its version, where its calls go, and what the run was asked. */
function recordSession(opts: RunHarnessOptions, run: PreparedRun, held: Held, harnessVersion: string | null, model: string): void {
  held.store.sessions.ensure(run.session, {
    harness: opts.harness.name,
    harnessVersion,
    cwd: opts.cwd,
    upstreamUrl: held.upstream?.baseUrl ?? (opts.proxyUrl ? proxyOrigin(opts.proxyUrl) : null),
    servedModel: model,
    metadata: {
      prompt: opts.prompt,
      log_file: run.logFile,
      interactive: opts.prompt === null,
      ...(opts.sandbox ? { sandbox: opts.sandbox.settings.kind, network: opts.sandbox.settings.kind === 'none' ? 'host' : opts.sandbox.network } : {}),
      ...(held.upstream ? tokenizerField(held.upstream) : {}),
      ...opts.sessionMetadata,
    },
  });
}

/** Runs the harness to its end and closes its jail, reporting the cap the jail saw it hit. */
async function superviseHarness(
  opts: RunHarnessOptions,
  run: PreparedRun,
  held: Held,
  cmd: CommandLine,
  feed: CallFeed | undefined,
): Promise<{ exit: HarnessExit; limit: string | null }> {
  const { store } = held;
  // A running `polar proxy` records in its own process: its calls reach this one only through the database.
  const progress =
    !held.proxy && (opts.onSessionSummary || feed)
      ? setInterval(() => {
          feed?.poll();
          const summary = opts.onSessionSummary ? store.sessions.summary(run.session) : undefined;
          if (summary) opts.onSessionSummary!(summary);
        }, 1000)
      : undefined;
  let exit: HarnessExit | undefined;
  let limit: string | null = null;
  try {
    exit = await runHarnessProcess(cmd, {
      cwd: opts.cwd,
      interactive: opts.prompt === null,
      logFile: run.logFile,
      echo: opts.quiet === 'stdout' ? 'stderr' : opts.quiet !== true,
      ...(opts.harness.stderrNoise ? { logOnlyStderr: opts.harness.stderrNoise } : {}),
      ...(opts.sandbox ? { logLimitBytes: opts.sandbox.settings.limits.maxFileSizeBytes } : {}),
      ...(opts.timeoutSec ? { timeoutMs: opts.timeoutSec * 1000 } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  } finally {
    if (progress) clearInterval(progress);
    limit = (await held.jail?.close(exit ? { exitCode: exit.exitCode, signal: null } : undefined)) ?? null;
    held.jail = undefined;
  }
  return { exit, limit };
}

/** The proxy's call events, each also a cue for the feed to read the call back (off the call's own turn). */
function feedOnCall(opts: RunHarnessOptions, feed: CallFeed | undefined): RunHarnessOptions['onCall'] {
  if (!feed) return opts.onCall;
  return (summary) => {
    opts.onCall?.(summary);
    setImmediate(() => feed.poll());
  };
}

function endStatus(exit: HarnessExit): RunHarnessResult['status'] {
  if (exit.endedBy === 'timeout') return 'timeout';
  if (exit.endedBy === 'interrupt') return 'aborted';
  return exit.exitCode === 0 ? 'completed' : 'failed';
}

/** Closes what the run opened, innermost first; a store the caller passed in is left open. */
async function release(held: Held): Promise<void> {
  await held.jail?.close();
  await held.proxy?.close(1000);
  await held.relay?.close();
  await held.ownSocket?.remove();
  await held.upstream?.close();
  if (held.ownsStore) await held.store.closeAsync();
}
