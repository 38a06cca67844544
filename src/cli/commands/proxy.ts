import { describeSampling, type SamplingPolicy } from '../../upstream/sampling-policy.js';
import type { Command } from 'commander';
import chalk from 'chalk';
import { type Capture, openCapture } from '../../capture/open.js';
import { PolarError } from '../../core/errors.js';
import { isValidSessionName, newId } from '../../core/ids.js';
import { isLoopbackHost } from '../../proxy/listen.js';
import { DEFAULT_MAX_BODY_BYTES, type RunningProxy } from '../../proxy/server.js';
import { adminTokenFile, loadOrCreateAdminToken } from '../../proxy/admin-token.js';
import type { CallSummary } from '../../proxy/call-record.js';
import { loadOrCreateMaster, masterKeyFile, type SessionKeys } from '../../proxy/session-keys.js';
import { openStore } from '../../store/open.js';
import { defaultDbPath, type Store } from '../../store/store.js';
import { integerArg } from '../numbers.js';
import { action, formatDuration } from '../output.js';
import {
  addSamplingModeOption,
  addUpstreamOptions,
  captureSampling,
  UPSTREAM_KINDS_HELP,
  upstreamOptionsFrom,
  type UpstreamFlags,
} from '../upstream-options.js';

interface ProxyCommandOptions extends UpstreamFlags {
  upstream: string;
  model?: string;
  host: string;
  port: number;
  db?: string;
  session?: string;
  maxBody: number;
  authToken?: string;
  sessionKeys?: boolean;
  allowHost?: string[];
  upstreamTimeout: number;
  contextWindow?: number;
  pauseLimit: number;
  policyVersion?: string;
  sampling?: string;
  json?: boolean;
  quiet?: boolean;
}

export function registerProxy(program: Command): void {
  const command = program
    .command('proxy')
    .description('serve the capture proxy: harnesses call it, it forwards to the inference server and records every call')
    .requiredOption('--upstream <url>', 'inference server base URL, e.g. http://127.0.0.1:8000');
  addSamplingModeOption(addUpstreamOptions(command))
    .option('--model <name>', "model to serve every call with (default: the upstream's first model)")
    .option('--host <host>', 'address to bind; non-loopback needs --auth-token', '127.0.0.1')
    .option('--port <n>', 'port to listen on (0: any free port)', integerArg('--port', 0, 65535), 8100)
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--session <name>', 'session for calls that name none (default: a new id)')
    .option('--max-body <bytes>', 'largest request body accepted', integerArg('--max-body', 1), DEFAULT_MAX_BODY_BYTES)
    .option('--auth-token <token>', 'require this token on every call (default: $POLAR_AUTH_TOKEN)')
    .option('--session-keys', "accept a session's calls only with its own key (polar run --proxy, same --db, mints them); refused calls go to `polar audit`")
    .option(
      '--allow-host <name...>',
      'host names callers may reach the proxy by, besides its address and loopback names (DNS-rebinding protection refuses others)',
    )
    .option('--upstream-timeout <seconds>', 'longest wait for an upstream reply or between streamed chunks', integerArg('--upstream-timeout', 1, 86_400), 900)
    .option(
      '--context-window <tokens>',
      "the served model's context length, to clamp max_tokens (default: the upstream's max_model_len)",
      integerArg('--context-window', 1, 100_000_000),
    )
    .option(
      '--pause-limit <seconds>',
      'while paused (POST /admin/pause), how long a new call waits before it gets 503',
      integerArg('--pause-limit', 1, 86_400),
      300,
    )
    .option('--policy-version <v>', 'the policy version to record on calls until POST /admin/policy-version sets another')
    .option('--json', 'print the listening address as one JSON line')
    .option('-q, --quiet', 'do not print a line per call')
    .addHelpText(
      'after',
      `
Point a harness at the printed base URL. Calls are filed under a session by, first hit wins:
  the path prefix   http://127.0.0.1:PORT/s/<session>/v1
  the header        x-polar-session: <session>
  the API key       polar-<session>
  else the proxy's default session (--session).
Without --session-keys any caller may name any session. With it, a call into session S must carry
S's key (polar-<S>~<secret>, as the API key) or the auth token; others get 401 and an audit row.
The keys' master is kept in .polar/session-keys.master beside the database (0600), where
\`polar run --proxy URL --db <same>\` finds it.
Upstream API keys for hosted OpenAI-compatible servers: set $POLAR_UPSTREAM_API_KEY (never recorded).
Around weight updates, with the auth token, or without one the admin token polar keeps (0600) in
.polar/admin-token beside the database (x-polar-auth-token: TOKEN or Authorization: Bearer TOKEN):
  POST /admin/pause {"drain_timeout_seconds": 300}   new calls wait; answers when in-flight calls are done
  POST /admin/policy-version {"version": "step-12"}  recorded on every call from now on
  POST /admin/resume                                 waiting calls go on
  GET  /admin/status
${UPSTREAM_KINDS_HELP}`,
    )
    .action(action(runProxy));
}

async function runProxy(opts: ProxyCommandOptions): Promise<void> {
  const session = opts.session ?? newId('ses');
  if (!isValidSessionName(session)) {
    throw new PolarError('POLAR_USAGE', `--session ${JSON.stringify(session)} is not a valid name: use letters, digits, . _ : -`);
  }
  const dbPath = opts.db ?? defaultDbPath();
  const authToken = opts.authToken ?? (process.env.POLAR_AUTH_TOKEN || undefined);
  // Without an auth token, admin routes take the token in polar's state folder (admin-token.ts).
  const adminFile = authToken ? null : adminTokenFile(dbPath);
  const started = await startProxy(opts, { session, dbPath, authToken, adminFile, sampling: captureSampling(opts) });
  const { capture, store } = started;
  // Ctrl-C is handled from before the banner: a caller that reads the banner and signals at once
  // (a script, a test on a busy machine) must not meet the default action, which kills the process.
  const shutdown = waitForShutdown(capture.proxy, opts.quiet === true);
  process.stdout.write(opts.json ? `${JSON.stringify(bannerJson(started))}\n` : banner(started));
  if (!isLoopbackHost(opts.host)) {
    process.stderr.write(chalk.yellow(`warning: listening on ${opts.host}: reachable from other machines; calls must present the auth token\n`));
  }
  await shutdown;
  try {
    store.sessions.end(session, 'completed');
  } catch (err) {
    // A full disk at shutdown: closing goes on; the next opener marks the session interrupted.
    process.stderr.write(chalk.yellow(`warning: could not mark session ${session} completed: ${(err as Error).message}\n`));
  }
  await store.closeAsync();
  await capture.upstream.close();
}

/** What runProxy settles before anything starts. */
interface ProxySettings {
  session: string;
  dbPath: string;
  authToken: string | undefined;
  /** The admin token's file, when there is no auth token to guard /admin/* with. */
  adminFile: string | null;
  /** Pass-through unless --sampling trainer (or a nemo-rl upstream). */
  sampling: SamplingPolicy;
}

/** A listening proxy and what it records into. */
interface StartedProxy extends ProxySettings {
  capture: Capture;
  store: Store;
  sessionKeys: SessionKeys | undefined;
}

/** Makes the upstream, resolves the model, opens the store and starts listening (openCapture). */
async function startProxy(opts: ProxyCommandOptions, settings: ProxySettings): Promise<StartedProxy> {
  const { session, dbPath, authToken, adminFile } = settings;
  const timeoutMs = opts.upstreamTimeout * 1000;
  // Made once the upstream is (as before openCapture): the store is closed here when the proxy cannot listen.
  const held: { store: Store | null; sessionKeys: SessionKeys | undefined } = { store: null, sessionKeys: undefined };
  try {
    const capture = await openCapture({
      kind: opts.upstreamKind,
      upstream: {
        baseUrl: opts.upstream,
        apiKey: process.env.POLAR_UPSTREAM_API_KEY || undefined,
        headersTimeoutMs: timeoutMs,
        bodyTimeoutMs: timeoutMs,
        ...upstreamOptionsFrom(opts),
      },
      model: opts.model,
      contextWindow: opts.contextWindow,
      // A proxy may come up before its server does: it warns and serves.
      allowUnreachable: true,
      onModelsError: opts.quiet
        ? undefined
        : (err) => process.stderr.write(chalk.yellow(`warning: could not list the upstream's models (${err.message}); pass --model NAME\n`)),
      proxy: async () => {
        held.sessionKeys = opts.sessionKeys ? loadOrCreateMaster(masterKeyFile(dbPath)) : undefined;
        held.store = await openStore(dbPath, { onNotice: (line) => process.stderr.write(`${chalk.yellow('store')}: ${line}\n`) });
        return {
          store: held.store,
          defaultSession: session,
          host: opts.host,
          port: opts.port,
          maxBodyBytes: opts.maxBody,
          authToken,
          ...(adminFile ? { adminToken: loadOrCreateAdminToken(adminFile) } : {}),
          ...(held.sessionKeys ? { sessionKeys: held.sessionKeys } : {}),
          ...(opts.allowHost ? { allowHosts: opts.allowHost } : {}),
          pauseLimitMs: opts.pauseLimit * 1000,
          ...(opts.policyVersion ? { policyVersion: opts.policyVersion } : {}),
          sampling: settings.sampling,
          onRefused: opts.quiet ? undefined : (reason) => process.stderr.write(`${chalk.yellow('refused')}: ${reason}\n`),
          onCall: opts.quiet ? undefined : (s) => process.stderr.write(`${formatCall(s)}\n`),
        };
      },
    });
    return { ...settings, capture, store: held.store!, sessionKeys: held.sessionKeys };
  } catch (err) {
    await held.store?.closeAsync();
    throw held.store ? listenError(err, opts.host, opts.port) : err;
  }
}

/** `--json`: the listening address and what it records, one line. */
function bannerJson({ capture, session, sessionKeys, store, dbPath, adminFile, sampling }: StartedProxy): Record<string, unknown> {
  const { proxy, upstream } = capture;
  return {
    url: proxy.url,
    baseUrl: proxy.baseUrl(),
    session,
    sessionKeys: sessionKeys !== undefined,
    db: store.label ?? dbPath,
    upstream: upstream.baseUrl,
    upstreamKind: upstream.kind,
    model: capture.model,
    contextWindow: capture.contextWindow,
    adminTokenFile: adminFile,
    sampling: { policy: sampling.mode, temperature: sampling.temperature, topP: sampling.topP, thinking: sampling.thinking },
  };
}

function banner({ capture, session, sessionKeys, store, dbPath, adminFile, sampling }: StartedProxy): string {
  const { proxy, upstream, model: servedModel, contextWindow } = capture;
  return [
    `${chalk.bold('polar proxy')} listening on ${proxy.url}`,
    `  base URL   ${proxy.baseUrl()}   (per session: ${proxy.url}/s/<session>/v1)`,
    `  upstream   ${upstream.baseUrl} (${upstream.kind}${upstream.capturesTokens ? ', token ids' : ', text only: token_source=none'})`,
    `  model      ${servedModel ?? '(as requested by each call)'}${contextWindow ? ` (context ${contextWindow} tokens)` : ''}`,
    `  session    ${session}`,
    `  access     ${sessionKeys ? `session keys (master ${masterKeyFile(dbPath)}); refused calls: polar audit` : 'open: any caller may name any session (--session-keys to require keys)'}`,
    `  database   ${store.label ?? dbPath}`,
    `  admin      /admin/* with ${adminFile ? `the token in ${adminFile}` : 'the auth token'}`,
    `  ${describeSampling(sampling).replace(': ', '   ')}`,
    '',
  ].join('\n');
}

/** Ctrl-C once: stop accepting, let in-flight calls finish, close the database. Twice: exit now. */
function waitForShutdown(proxy: RunningProxy, quiet: boolean): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write('polar proxy: forced exit\n');
        process.exit(130);
      }
      stopping = true;
      if (!quiet) process.stderr.write(`polar proxy: ${signal}, finishing ${proxy.inFlight()} in-flight call(s)…\n`);
      void proxy.close().then(() => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

function formatCall(s: CallSummary): string {
  const status =
    s.status === 'ok' ? chalk.green(String(s.httpStatus)) : s.status === 'aborted' ? chalk.yellow('aborted') : chalk.red(String(s.httpStatus ?? 'err'));
  const tokens = s.promptTokens !== null ? `${s.promptTokens}→${s.sampledTokens ?? 0} tok` : 'no ids';
  const err = s.error ? chalk.dim(` ${s.error.slice(0, 120)}`) : '';
  return `${chalk.dim(new Date().toISOString().slice(11, 19))} ${s.sessionId} #${s.seq} ${s.agentId !== 'main' ? `${s.agentId} ` : ''}${s.provider} ${status}${s.streamed ? ' stream' : ''} ${tokens} ${formatDuration(s.durationMs)}${err}`;
}

function listenError(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === 'EADDRINUSE') return new PolarError('POLAR_USAGE', `port ${port} on ${host} is in use; pick another --port or 0`);
  if (code === 'EADDRNOTAVAIL') return new PolarError('POLAR_USAGE', `cannot bind ${host}: no such local address`);
  return err;
}
