import type { ProviderName } from '../core/chat.js';
import type { CommandLine } from '../core/process/command-line.js';

export type HarnessName = 'claude-code' | 'codex' | 'gemini-cli' | 'qwen-code' | 'pi' | 'opencode' | 'custom';

/** Everything an adapter needs to point its harness at one polar session. */
export interface HarnessContext {
  /** The proxy's origin, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  proxyUrl: string;
  /** The session every call of this run belongs to. */
  session: string;
  /**
   * The API key the harness presents: `polar-<session>~<secret>` (session-keys.ts), the session's
   * capability (the proxy accepts its calls with it and no other session's); `polar-<session>`
   * against an open proxy. It goes in the harness's env or private config files, never its argv.
   */
  apiKey: string;
  /** The model name the harness should ask for (the served model). */
  model: string;
  /**
   * The run's private home as the harness sees it (its HOME, and every config path put in its env);
   * the user's own is never touched. In a rollout's sandbox a fixed path (sandbox/fixed-paths.ts),
   * so no sample's first prompt names its own folder or session.
   */
  home: string;
  /** The workspace as the harness sees it (a fixed path in a rollout's sandbox, Harbor's /app). */
  cwd: string;
  /** Where the private home is on this machine, for writeConfig: `home` when absent (no sandbox, `polar run`). */
  hostHome?: string;
  /** Where the workspace is on this machine: `cwd` when absent. */
  hostCwd?: string;
  /** The served model's context length, when known (harnesses size compaction by it). */
  contextWindow: number | null;
  /** Whether polar runs as root (Claude Code then needs IS_SANDBOX=1 to skip permissions). */
  isRoot: boolean;
  /**
   * Keep the main agent's conversation one append-only token chain (rollout, worker, gym-agent,
   * train): the harness's automatic compaction, history summarising and context trimming are
   * switched off by configuration, and the window it is told is the model's, so a session that
   * outgrows it ends there (like a max-length rollout in NeMo-RL) instead of being rewritten into a
   * second trace that NeMo-RL would have to mask. False (`polar run`, `polar proxy`): the
   * harness's own defaults.
   */
  appendOnly: boolean;
}

/** A command line ready to spawn; `env` is complete (not merged with polar's own environment). */
export type HarnessCommand = CommandLine;

/**
 * One coding-agent CLI. `writeConfig` writes the private config; `command` is pure, so tests check
 * argv and env without spawning.
 */
export interface Harness {
  readonly name: HarnessName;
  /** The API its traffic speaks (which codec serves it). */
  readonly provider: ProviderName;
  /** The npm package that installs it, for the "not installed" message; null for `custom`. */
  readonly packageName: string | null;
  /** The executable name looked up in node_modules/.bin and PATH. */
  readonly binName: string;
  /** Node major version the CLI needs, when it needs more than polar does. */
  readonly minNodeMajor?: number;
  /**
   * Why this harness's main agent can still leave the append-only chain with `appendOnly` set (a
   * rewrite no setting of the tested version turns off), or null when every one is switched off.
   * `rollout` and `train` print it at start.
   */
  readonly appendOnlyGap: string | null;
  /** Request headers that name the (sub-)agent making a call, in priority order. */
  readonly agentHeaders: readonly string[];
  /**
   * Starts of the lines on the harness's stderr that polar keeps off the user's terminal (the run's
   * log file still has them): what the CLI says about a setup polar chose, in words that read as a fault.
   */
  readonly stderrNoise?: readonly string[];
  writeConfig(ctx: HarnessContext): Promise<void>;
  /** Headless when `prompt` is given, interactive otherwise. */
  command(bin: string, ctx: HarnessContext, prompt: string | null, extraArgs: readonly string[], baseEnv: Record<string, string>): HarnessCommand;
}

/** URLs a harness can be given; the session rides in the path so every call is attributed. */
export function sessionUrls(ctx: HarnessContext): { root: string; v1: string } {
  const root = `${ctx.proxyUrl}/s/${encodeURIComponent(ctx.session)}`;
  return { root, v1: `${root}/v1` };
}

/** The private home on this machine, where writeConfig puts files the harness reads at `ctx.home`. */
export function configHome(ctx: HarnessContext): string {
  return ctx.hostHome ?? ctx.home;
}
