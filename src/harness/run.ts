import { existsSync, realpathSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { openCapture } from '../capture/open.js';
import { PolarError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import { DEFAULT_AGENT_HEADERS } from '../proxy/identity.js';
import type { CallSummary } from '../proxy/call-record.js';
import { tokenizerField, type RunningProxy } from '../proxy/server.js';
import { masterKeyFile, readMaster, SessionKeys } from '../proxy/session-keys.js';
import type { SessionStatus, SessionSummary } from '../store/sessions.js';
import { openStore } from '../store/open.js';
import { isPostgresUrl, localStateDir } from '../store/postgres/url.js';
import type { Store } from '../store/store.js';
import type { UpstreamOptions } from '../upstream/create.js';
import type { Upstream } from '../upstream/types.js';
import { baseEnvironment } from './env.js';
import { resolveHarnessBin } from './resolve.js';
import { ensureNode } from './node-runtime.js';
import { checkWorkdir, openJail, privateSocketPath, startRelay, type Bind, type Jail, type NetworkMode, type SandboxSettings } from '../sandbox/index.js';
import { runCommand } from '../core/process/command.js';
import { runHarnessProcess } from '../core/process/harness-process.js';
import type { Harness, HarnessContext } from './types.js';

export interface RunHarnessOptions {
  harness: Harness;
  harnessBin?: string;
  /** Headless with a prompt; interactive (terminal handed through) without. */
  prompt: string | null;
  cwd: string;
  dbPath: string;
  /** Start a proxy in this process against this upstream… */
  upstream?: { url: string; kind: string; apiKey?: string; timeoutMs?: number } & Omit<UpstreamOptions, 'baseUrl'>;
  /** …or use a running `polar proxy` at this URL (it records into its own database). */
  proxyUrl?: string;
  model?: string;
  contextWindow?: number;
  session?: string;
  timeoutSec?: number;
  extraArgs?: readonly string[];
  /** A Node.js binary to run JavaScript harnesses with (its directory goes first on their PATH). */
  nodeBin?: string;
  /** The environment to inherit from (an allow-list of it); defaults to polar's own. */
  parentEnv?: NodeJS.ProcessEnv;
  /** Each call of this run as it ends, from the proxy the run started. */
  onCall?: (summary: CallSummary) => void;
  /** With a running proxy (`proxyUrl`), whose calls this process does not see: the session's totals, polled. */
  onSessionSummary?: (summary: SessionSummary) => void;
  /** Keep the harness's output out of polar's stdout/stderr (it still goes to the log file). */
  quiet?: boolean;
  /** One-off lines for the user while preparing (e.g. installing a Node.js runtime). */
  onNotice?: (line: string) => void;
  /**
   * Run the harness inside this sandbox: the working directory and its private home writable, the
   * rest of the minimal view read-only, `network` its way out. `proxySocket`: the Unix socket of a
   * proxy that serves it (a rollout's); without one, polar makes one for the proxy it starts, or
   * relays one to `proxyUrl`.
   */
  sandbox?: {
    settings: SandboxSettings;
    network: NetworkMode;
    proxySocket?: string;
    readOnly?: readonly string[];
    cwdInside?: string;
    binds?: readonly Bind[];
    /**
     * A Harbor task's container (rollout/harbor/container.ts): the harness runs in it instead of a
     * bubblewrap sandbox, behind the proxy bridge on this port.
     */
    container?: (proxyPort: number) => Jail;
  };
  /** Extra session metadata (a rollout's sample, task and group). */
  sessionMetadata?: Record<string, unknown>;
  /** An open store on `dbPath` to use (a rollout's), instead of opening one; it is left open. */
  store?: Store;
  /** The harness's version when already known (a rollout asks once), so `--version` is not run again. */
  harnessVersion?: string | null;
  /**
   * Mints the session's key (the proxy checks it). A run that starts its own proxy makes a fresh
   * master when none is given; with `proxyUrl` and none given, the master `polar proxy
   * --session-keys` keeps beside the database is used when there is one.
   */
  sessionKeys?: SessionKeys;
}

export interface RunHarnessResult {
  session: string;
  exitCode: number;
  status: Exclude<SessionStatus, 'active'>;
  logFile: string;
  harnessVersion: string | null;
  summary: SessionSummary | undefined;
  /** The sandbox cap the run hit ("memory limit 4 GiB reached …"), null when none. */
  limit: string | null;
}

/**
 * One harness run, from prompt to captured session: a proxy (or a running one), a session row
 * carrying the harness and its version, a private config directory, the harness process, and the
 * session's end status (`completed`, `failed`, `timeout`, `aborted`).
 */
export async function runHarness(opts: RunHarnessOptions): Promise<RunHarnessResult> {
  const { harness } = opts;
  const sandboxed = opts.sandbox && opts.sandbox.settings.kind !== 'none' ? opts.sandbox : undefined;
  // Before anything is opened or recorded: a working directory the sandbox refuses leaves nothing behind.
  if (sandboxed) checkWorkdir(opts.cwd);
  const session = opts.session ?? newId('ses');
  const bin = await resolveHarnessBin(harness, opts.harnessBin, opts.cwd, opts.parentEnv?.PATH ?? process.env.PATH);
  const baseEnv = baseEnvironment(opts.parentEnv);
  const nodeDir = opts.nodeBin
    ? path.dirname(realpathSync(path.resolve(opts.nodeBin)))
    : harness.minNodeMajor
      ? await ensureNode(harness.minNodeMajor, harness.name, baseEnv, opts.onNotice)
      : null;
  if (nodeDir) baseEnv.PATH = [nodeDir, baseEnv.PATH].filter(Boolean).join(path.delimiter);

  const runDir = path.join(localStateDir(opts.dbPath), '.polar', 'runs', session);
  const home = path.join(runDir, 'home');
  await mkdir(home, { recursive: true, mode: 0o700 });
  const logFile = path.join(runDir, 'harness.log');

  const store = opts.store ?? (await openStore(opts.dbPath, { onNotice: (line) => opts.onNotice?.(line) }));
  let upstream: Upstream | undefined;
  let proxy: RunningProxy | undefined;
  // A proxy-only sandbox reaches the proxy through a Unix socket: the caller's, or one made here.
  const ownSocket = sandboxed?.network === 'proxy-only' && !sandboxed.proxySocket ? await privateSocketPath() : undefined;
  let relay: { close(): Promise<void> } | undefined;
  let jail: Jail | undefined;
  try {
    let proxyUrl: string;
    let model = opts.model ?? null;
    let contextWindow = opts.contextWindow ?? null;
    const keys = opts.sessionKeys ?? (opts.proxyUrl ? readMaster(masterKeyFile(opts.dbPath)) : SessionKeys.random());
    if (opts.proxyUrl) {
      proxyUrl = opts.proxyUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
    } else if (opts.upstream) {
      const { url, kind, timeoutMs, ...rest } = opts.upstream;
      // The proxy listens from here on; the harness reaches it only once its config is written below.
      const capture = await openCapture({
        kind,
        upstream: { ...rest, baseUrl: url, ...(timeoutMs ? { headersTimeoutMs: timeoutMs, bodyTimeoutMs: timeoutMs } : {}) },
        model,
        contextWindow,
        noModel: 'could not learn the served model from the upstream; pass --model NAME',
        proxy: {
          store,
          defaultSession: session,
          ...(keys ? { sessionKeys: keys } : {}),
          agentHeaders: [...harness.agentHeaders, ...DEFAULT_AGENT_HEADERS],
          ...(opts.onCall ? { onCall: opts.onCall } : {}),
          ...(ownSocket ? { unixSocket: ownSocket.path } : {}),
        },
      });
      ({ upstream, proxy, model, contextWindow } = capture);
      proxyUrl = capture.proxy.url;
    } else {
      throw new PolarError('POLAR_USAGE', 'polar run needs --upstream URL (an inference server) or --proxy URL (a running polar proxy)');
    }
    if (!model) throw new PolarError('POLAR_USAGE', 'could not learn the served model from the upstream; pass --model NAME');

    // Without a master (an open `polar proxy`), the key only names the session, as it always did.
    const apiKey = keys ? keys.keyFor(session) : `polar-${session}`;
    // With the workspace mounted elsewhere inside (a Harbor task's /app), the harness is told that path.
    const ctxBase: Omit<HarnessContext, 'proxyUrl'> = {
      session,
      apiKey,
      model,
      home,
      cwd: sandboxed?.cwdInside ?? opts.cwd,
      contextWindow,
      isRoot: process.getuid?.() === 0,
    };
    const harnessVersion =
      opts.harnessVersion !== undefined ? opts.harnessVersion : await versionOf(harness, bin, { ...ctxBase, proxyUrl: 'http://127.0.0.1:9' }, baseEnv);
    store.sessions.ensure(session, {
      harness: harness.name,
      harnessVersion,
      cwd: opts.cwd,
      upstreamUrl: upstream?.baseUrl ?? proxyUrlOrNull(opts.proxyUrl),
      servedModel: model,
      metadata: {
        prompt: opts.prompt,
        log_file: logFile,
        interactive: opts.prompt === null,
        ...(opts.sandbox ? { sandbox: opts.sandbox.settings.kind, network: opts.sandbox.settings.kind === 'none' ? 'host' : opts.sandbox.network } : {}),
        ...(upstream ? tokenizerField(upstream) : {}),
        ...opts.sessionMetadata,
      },
    });
    if (!upstream) {
      proxyUrl = proxyUrlOrNull(opts.proxyUrl)!;
      if (ownSocket) {
        const target = new URL(proxyUrl);
        if (!['127.0.0.1', 'localhost', '[::1]'].includes(target.hostname)) {
          throw new PolarError(
            'POLAR_USAGE',
            `a sandbox with --network proxy-only reaches a proxy on this machine only (--proxy ${proxyUrl}); use a local proxy, or --network host`,
          );
        }
        relay = await startRelay(
          ownSocket.path,
          target.hostname === 'localhost' ? '127.0.0.1' : target.hostname.replace(/^\[|\]$/g, ''),
          Number(target.port || 80),
        );
      }
    }

    const ctx: HarnessContext = { ...ctxBase, proxyUrl };
    await harness.writeConfig(ctx);
    const plain = harness.command(bin, ctx, opts.prompt, opts.extraArgs ?? [], baseEnv);
    if (sandboxed?.container) {
      jail = sandboxed.container(Number(new URL(proxyUrl).port || 80));
    } else if (sandboxed) {
      const socket = sandboxed.proxySocket ?? ownSocket?.path;
      jail = await openJail(sandboxed.settings, {
        cwd: opts.cwd,
        home,
        network: sandboxed.network,
        ...(sandboxed.network === 'proxy-only' ? { proxy: { port: Number(new URL(proxyUrl).port || 80), socket: socket! } } : {}),
        // The Node runtime a harness needs beyond polar's, and a harness binary given by path.
        readOnly: [...(nodeDir ? [path.dirname(nodeDir)] : []), ...(opts.harnessBin ? [bin] : []), ...(sandboxed.readOnly ?? [])],
        interactive: opts.prompt === null,
        findCappedFiles: true,
        ...(sandboxed.cwdInside ? { cwdInside: sandboxed.cwdInside } : {}),
        ...(sandboxed.binds ? { binds: sandboxed.binds } : {}),
        hidden: recordsUnder(opts.cwd, opts.dbPath),
      });
    }
    const cmd = jail ? jail.wrap(plain) : plain;
    // A running `polar proxy` records in its own process: its calls reach this one only through the database.
    const progress =
      !proxy && opts.onSessionSummary
        ? setInterval(() => {
            const summary = store.sessions.summary(session);
            if (summary) opts.onSessionSummary!(summary);
          }, 1000)
        : undefined;
    let exit: Awaited<ReturnType<typeof runHarnessProcess>> | undefined;
    let limit: string | null = null;
    try {
      exit = await runHarnessProcess(cmd, {
        cwd: opts.cwd,
        interactive: opts.prompt === null,
        logFile,
        echo: opts.quiet !== true,
        ...(opts.sandbox ? { logLimitBytes: opts.sandbox.settings.limits.maxFileSizeBytes } : {}),
        ...(opts.timeoutSec ? { timeoutMs: opts.timeoutSec * 1000 } : {}),
      });
    } finally {
      if (progress) clearInterval(progress);
      limit = (await jail?.close(exit ? { exitCode: exit.exitCode, signal: null } : undefined)) ?? null;
      jail = undefined;
    }
    // In-flight calls finish (or are recorded as aborted) before the session is closed.
    await proxy?.close(5000);
    proxy = undefined;
    const status: RunHarnessResult['status'] =
      exit.endedBy === 'timeout' ? 'timeout' : exit.endedBy === 'interrupt' ? 'aborted' : exit.exitCode === 0 ? 'completed' : 'failed';
    store.sessions.end(session, status);
    return { session, exitCode: exit.exitCode, status, logFile, harnessVersion, summary: store.sessions.summary(session), limit };
  } finally {
    await jail?.close();
    await proxy?.close(1000);
    await relay?.close();
    await ownSocket?.remove();
    await upstream?.close();
    if (!opts.store) await store.closeAsync();
  }
}

/**
 * polar's own records inside the folder a run makes writable (`polar run` in a project whose
 * `./polar.db` is the default database): the database with its WAL and shared-memory files, and the
 * `.polar/` state folder (other runs' homes and logs, the session-key master, the admin token). The
 * agent must neither read other sessions nor rewrite its own record, so the sandbox hides them; the
 * session's own home under `.polar/runs/` is mounted on top again.
 */
function recordsUnder(cwd: string, dbPath: string): { path: string; dir: boolean }[] {
  const root = realOr(path.resolve(cwd));
  const inside = (p: string) => {
    const r = realOr(p);
    return r === root || r.startsWith(`${root}/`);
  };
  const state = path.join(localStateDir(dbPath), '.polar');
  const found: { path: string; dir: boolean }[] = [];
  if (existsSync(state) && inside(state)) found.push({ path: realOr(state), dir: true });
  if (!isPostgresUrl(dbPath)) {
    for (const suffix of ['', '-wal', '-shm', '-journal']) {
      const file = path.resolve(dbPath + suffix);
      if (existsSync(file) && inside(file)) found.push({ path: realOr(file), dir: false });
    }
  }
  return found;
}

function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

function proxyUrlOrNull(url: string | undefined): string | null {
  return url ? url.replace(/\/+$/, '').replace(/\/v1$/, '') : null;
}

/** The harness's own `--version`, best effort (null when it will not say within 15 s). */
async function versionOf(harness: Harness, bin: string, ctx: HarnessContext, baseEnv: Record<string, string>): Promise<string | null> {
  if (harness.packageName === null) return null;
  const env = harness.command(bin, ctx, 'version', [], baseEnv).env;
  // Some CLIs (Pi) print their version on stderr.
  const { output } = await runCommand(bin, ['--version'], { env, timeoutMs: 15_000 });
  const line = output.split('\n').find((l) => /\d+\.\d+/.test(l));
  return line ? (/\d+\.\d+\.\d+[\w.-]*/.exec(line)?.[0] ?? line.trim()) : null;
}
