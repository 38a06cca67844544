/**
 * Claude Code (`@anthropic-ai/claude-code`), config checked against 2.1.330 by recording it against a
 * stub server (fixtures/requests/claude-code). Facts relied on, from harnesses.md §2:
 * - `ANTHROPIC_BASE_URL` is the API root without `/v1` (the CLI appends `/v1/messages`); the session
 *   rides in the path, so the root is `sessionUrls(ctx).root`.
 * - Every model variable is pinned, since Haiku-class background work and sub-agents otherwise ask
 *   for other model names (§1.4).
 * - `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` (any value) stops update, telemetry and feature-flag
 *   traffic to api.anthropic.com; the other quiet variables cover what it does not.
 * - `--dangerously-skip-permissions` is refused as root unless `IS_SANDBOX=1` (anthropics/claude-code
 *   #3490), so that variable is set only when polar runs as root.
 * - `stream-json` with `-p` requires `--verbose`.
 * - `CLAUDE_CODE_MAX_CONTEXT_TOKENS` replaces the window it would assume for an unknown model id (§1.6).
 * Interactive mode, checked under a pseudo-terminal with 2.1.330, stops at four screens before the
 * prompt in a fresh config dir: onboarding (whose connectivity check to api.anthropic.com fails
 * offline), folder trust, "use this API key?" and the bypass-permissions warning. The state Claude
 * Code itself stores after those answers is written up front (`.claude.json`, `settings.json`).
 */
import { readFile, realpath } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

/**
 * Claude Code's private config dir (settings, sessions, `.claude.json`): never the user's ~/.claude.
 * Under `home`: the harness's view of it (`ctx.home`) for its env, polar's (`configHome`) for writing.
 */
export function claudeConfigDir(home: string): string {
  return join(home, '.claude');
}

function claudeEnv(ctx: HarnessContext, baseEnv: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {
    ...baseEnv,
    HOME: ctx.home,
    CLAUDE_CONFIG_DIR: claudeConfigDir(ctx.home),
    ANTHROPIC_BASE_URL: sessionUrls(ctx).root,
    ANTHROPIC_API_KEY: ctx.apiKey,
    ANTHROPIC_MODEL: ctx.model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: ctx.model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: ctx.model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: ctx.model,
    CLAUDE_CODE_SUBAGENT_MODEL: ctx.model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_DISABLE_FAST_MODE: '1',
  };
  if (ctx.isRoot) env.IS_SANDBOX = '1';
  if (ctx.contextWindow !== null) {
    env.CLAUDE_CODE_MAX_CONTEXT_TOKENS = String(ctx.contextWindow);
    // Claude Code reserves its output budget (32,000 by default for an unknown model) out of the
    // window before it compacts; with a 40,960-token Qwen3 window that leaves less than its own
    // ~12k-token system prompt, and it compacts in a loop ("autocompact is thrashing", seen with
    // 2.1.330). A quarter of the window leaves room for the prompt and the conversation.
    env.CLAUDE_CODE_MAX_OUTPUT_TOKENS = String(Math.min(32_000, Math.floor(ctx.contextWindow / 4)));
  }
  if (ctx.appendOnly) Object.assign(env, appendOnlyEnv(ctx.contextWindow));
  return env;
}

/**
 * Claude Code's history rewrites, off (read in the 2.1.330 binary). One gate holds every compaction
 * path (proactive auto-compact, reactive compaction on "prompt is too long", precomputed and idle
 * compaction): `DISABLE_AUTO_COMPACT` or `DISABLE_COMPACT` closes it. With it closed, Claude Code
 * instead refuses to send a prompt it estimates past window − min(output, 20000) − 3000 ("Prompt is
 * too long", the turn ends): at a 20,480-token window with its ~12k-token system prompt that stops a
 * session at its second or third call. `CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE` moves that limit to the
 * window itself, so a session ends where the model's context does (the proxy gives the last reply
 * the room that is left). Server-side tool-result clearing (`context_management`) is a request the
 * proxy does not carry out, and the client-side micro-compaction is behind remote feature flags that
 * nonessential traffic off leaves at their defaults (off).
 */
export function appendOnlyEnv(contextWindow: number | null): Record<string, string> {
  return {
    DISABLE_AUTO_COMPACT: '1',
    DISABLE_COMPACT: '1',
    ...(contextWindow !== null ? { CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE: String(contextWindow) } : {}),
  };
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Sets our keys in a JSON file Claude Code also writes to (it keeps counters and history there). */
async function mergeJsonFile(file: string, update: (current: Json) => Json): Promise<void> {
  let current: Json = {};
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (isObject(parsed)) current = parsed;
  } catch (err) {
    // Missing or not JSON: start afresh. Anything else (permissions, I/O) is a real failure.
    if (!(err instanceof SyntaxError) && (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await writePrivateFile(file, `${JSON.stringify(update(current), null, 2)}\n`);
}

/**
 * The answers to the first-run screens, as Claude Code stores them in `.claude.json`. `cwd` is the
 * workspace as the harness process will see it (its project trust is keyed by that path).
 */
export function claudeState(current: Json, apiKey: string, cwd: string): Json {
  // Claude Code remembers an approved key by its last 20 characters.
  const keyTail = apiKey.slice(-20);
  const responses = isObject(current.customApiKeyResponses) ? current.customApiKeyResponses : {};
  const others = (list: unknown): unknown[] => (Array.isArray(list) ? list.filter((k) => k !== keyTail) : []);
  const projects = isObject(current.projects) ? current.projects : {};
  const project = isObject(projects[cwd]) ? projects[cwd] : {};
  return {
    ...current,
    hasCompletedOnboarding: true,
    customApiKeyResponses: { ...responses, approved: [...others(responses.approved), keyTail], rejected: others(responses.rejected) },
    projects: { ...projects, [cwd]: { ...project, hasTrustDialogAccepted: true } },
  };
}

export const claudeCode: Harness = {
  name: 'claude-code',
  provider: 'anthropic-messages',
  packageName: '@anthropic-ai/claude-code',
  // A native (Bun) binary since 2.1.113: its `engines` says node >= 22, but it runs without node.
  binName: 'claude',
  appendOnlyGap: null,
  // The recorded main-agent calls (fixtures/requests/claude-code/*.json) carry only
  // `x-claude-code-session-id`, which is the same for every agent of a run. Claude Code adds
  // `x-claude-code-agent-id` only when a sub-agent makes the call (2.1.330's header builder sets it
  // from the agent context), so main stays `main` and each sub-agent gets its own id.
  // `x-claude-code-parent-agent-id` names the parent, not the caller, so it is left out.
  agentHeaders: ['x-claude-code-agent-id'],
  // In print mode 2.1.330 writes `[claude-code:unrecognized_model] {"model":…,"query_source":…}` to
  // stderr, once per model id it does not know as Claude's (its built-in list, or a Claude id that
  // settings' `modelOverrides` maps onto it), so on every run polar makes. Only that mapping silences
  // it (`CLAUDE_CODE_SESSION_KIND=bg` moves it to the debug log but makes a background session), and
  // with it Claude Code takes the served model for that Claude model: checked with the mock, its
  // system prompt grew from 7,132 to 28,834 characters. So the line goes to the log file only.
  stderrNoise: ['[claude-code:unrecognized_model] '],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    const dir = claudeConfigDir(configHome(ctx));
    await privateDirs(configHome(ctx), dir);
    // Unsandboxed, the process sees the real path (a symlinked /tmp resolved); a sandbox's fixed
    // path (hostCwd set) exists only inside, as given.
    const cwd = ctx.hostCwd !== undefined && ctx.hostCwd !== ctx.cwd ? ctx.cwd : await realpath(ctx.cwd).catch(() => resolve(ctx.cwd));
    await mergeJsonFile(join(dir, '.claude.json'), (current) => claudeState(current, ctx.apiKey, cwd));
    await mergeJsonFile(join(dir, 'settings.json'), (current) => ({ ...current, skipDangerousModePermissionPrompt: true }));
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = claudeEnv(ctx, baseEnv);
    if (prompt === null) {
      return { file: bin, args: ['--model', ctx.model, '--dangerously-skip-permissions', ...extraArgs], env };
    }
    // `-p` is a boolean (print mode) and the prompt is the positional argument; `--` keeps a prompt
    // that starts with `-` from being read as an option.
    const args = ['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', '--model', ctx.model, ...extraArgs, '--', prompt];
    return { file: bin, args, env };
  },
};
