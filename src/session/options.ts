import type { CallSummary } from '../proxy/call-record.js';
import type { SessionKeys } from '../proxy/session-keys.js';
import type { Bind, Jail, NetworkMode, SandboxSettings } from '../sandbox/index.js';
import type { SessionStatus, SessionSummary } from '../store/sessions.js';
import type { Store } from '../store/store.js';
import type { UpstreamOptions } from '../upstream/create.js';
import type { SamplingPolicy } from '../upstream/sampling-policy.js';
import type { Harness } from '../harness/types.js';
import type { RecordedCall } from './call-feed.js';

export interface RunHarnessOptions {
  harness: Harness;
  harnessBin?: string;
  /** Headless with a prompt; interactive (terminal handed through) without. */
  prompt: string | null;
  cwd: string;
  dbPath: string;
  /** Start a proxy in this process against this upstream… */
  upstream?: { url: string; kind: string; apiKey?: string; timeoutMs?: number } & Omit<UpstreamOptions, 'baseUrl'>;
  /** With `upstream`: who chooses each call's sampling (left out: pass-through, plain capture). */
  sampling?: SamplingPolicy;
  /** …or use a running `polar proxy` at this URL (it records into its own database). */
  proxyUrl?: string;
  model?: string;
  contextWindow?: number;
  /** Switch the harness's compaction and history trimming off (HarnessContext.appendOnly); rollouts set it. */
  appendOnly?: boolean;
  session?: string;
  timeoutSec?: number;
  /** Ends the harness as Ctrl-C would; the session ends `aborted` (`polar serve`'s cancel and early stop). */
  signal?: AbortSignal;
  extraArgs?: readonly string[];
  /** A Node.js binary to run JavaScript harnesses with (its directory goes first on their PATH). */
  nodeBin?: string;
  /** The environment to inherit from (an allow-list of it); defaults to polar's own. */
  parentEnv?: NodeJS.ProcessEnv;
  /** Each call of this run as it ends, from the proxy the run started. */
  onCall?: (summary: CallSummary) => void;
  /** With a running proxy (`proxyUrl`), whose calls this process does not see: the session's totals, polled. */
  onSessionSummary?: (summary: SessionSummary) => void;
  /**
   * Keep the harness's output out of polar's stdout/stderr (it still goes to the log file);
   * `'stdout'`: only its stdout, where polar prints its own lines (`onCallRecorded`).
   */
  quiet?: boolean | 'stdout';
  /**
   * Each call of the session once its row is complete, read back from the database with the
   * assistant's reply: as calls end with a proxy this run started, every second with `proxyUrl`.
   */
  onCallRecorded?: (call: RecordedCall) => void;
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
    /** The working directory's path inside (a Harbor task's WORKDIR, a rollout's fixed workspace). */
    cwdInside?: string;
    /** The private home's path inside (a rollout's fixed home): the harness is told this path, never the host's. */
    homeInside?: string;
    /**
     * A rollout's fixed view (sandbox/fixed-paths.ts): polar's install (the harness itself) shown
     * under this path, a Node runtime polar gives the harness at `<polarInside>/node`…
     */
    polarInside?: string;
    /** …and this time zone (UTC) over the host's. */
    tz?: string;
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

/** The sandbox settings a run uses, or undefined when it runs unsandboxed (`--sandbox none`). */
export function activeSandbox(opts: Pick<RunHarnessOptions, 'sandbox'>): RunHarnessOptions['sandbox'] {
  return opts.sandbox && opts.sandbox.settings.kind !== 'none' ? opts.sandbox : undefined;
}
