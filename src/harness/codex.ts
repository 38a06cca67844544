/**
 * Codex CLI (`@openai/codex`), config checked against 0.169.0 by recording it against a stub server
 * (fixtures/requests/codex). Facts relied on, from harnesses.md §3:
 * - Only the Responses wire API exists, and the `OPENAI_BASE_URL` env var was removed (PR #16720), so
 *   a custom provider in `$CODEX_HOME/config.toml` points it here; `[model_providers.openai]` cannot
 *   override the built-in one (#11698). Codex appends `/responses` to `base_url`.
 * - `env_key` names the variable holding the key, sent as `Authorization: Bearer`.
 * - Unknown model slugs get catalog defaults for the window (#34837): set both limits when known.
 * - `codex exec` defaults to a read-only sandbox, and bwrap/landlock often fails in containers, at
 *   times as a silent exit 0 (#46246, #15434): `--dangerously-bypass-approvals-and-sandbox`. Its own
 *   sandbox could not nest inside polar's anyway (no capabilities, no new user namespaces): polar's
 *   bwrap (src/sandbox) is what contains it, with the workspace its only writable folder.
 */
import { join } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

/** The variable `env_key` names; it carries `ctx.apiKey`. */
const KEY_VAR = 'POLAR_API_KEY';

/** Compact at 80% of the window, leaving room for the reply and the summary request. */
const AUTO_COMPACT_FRACTION = 0.8;

/** Codex's private home (config, auth, rollouts, logs) under a private home: never the user's ~/.codex. */
export function codexHome(home: string): string {
  return join(home, '.codex');
}

/**
 * A TOML basic string. JSON's escapes (`\"`, `\\`, `\n`, `\uXXXX`, …) are all valid TOML escapes;
 * DEL is the one control character JSON leaves raw and TOML forbids.
 */
function tomlString(value: string): string {
  return JSON.stringify(value).replace(/\x7f/g, '\\u007f');
}

/**
 * Codex has no switch that turns auto-compaction off (0.169.0): it compacts once a turn's tokens reach
 * min(`model_auto_compact_token_limit`, 90% of `model_context_window`). Append-only, the limit is
 * one past the window, which no call's prompt plus reply can reach (the proxy caps each reply at the
 * room left), and the window is told large enough that its 90% is above that limit; a session that
 * outgrows the model's window then ends on the server's context-length error ("Codex ran out of room
 * in the model's context window"), which Codex does not answer by compacting.
 */
export function codexWindow(contextWindow: number, appendOnly: boolean): { window: number; compactAt: number } {
  if (!appendOnly) return { window: contextWindow, compactAt: Math.floor(contextWindow * AUTO_COMPACT_FRACTION) };
  const compactAt = contextWindow + 1;
  return { window: Math.ceil(compactAt / 0.9) + 1, compactAt };
}

export function codexConfigToml(ctx: HarnessContext): string {
  const lines = [`model = ${tomlString(ctx.model)}`, 'model_provider = "polar"', 'check_for_update_on_startup = false'];
  if (ctx.contextWindow !== null) {
    const { window, compactAt } = codexWindow(ctx.contextWindow, ctx.appendOnly);
    lines.push(`model_context_window = ${window}`);
    lines.push(`model_auto_compact_token_limit = ${compactAt}`);
  }
  lines.push(
    '',
    '[model_providers.polar]',
    'name = "polar"',
    `base_url = ${tomlString(sessionUrls(ctx).v1)}`,
    `env_key = "${KEY_VAR}"`,
    'wire_api = "responses"',
  );
  return `${lines.join('\n')}\n`;
}

export const codex: Harness = {
  name: 'codex',
  provider: 'openai-responses',
  packageName: '@openai/codex',
  binName: 'codex',
  appendOnlyGap: null,
  // The recorded main-agent calls (fixtures/requests/codex/*.json) carry `session-id` and `thread-id`
  // (one value for the whole run) and no `x-openai-subagent` or `x-codex-parent-thread-id`. Codex
  // adds `x-openai-subagent` (review, compact, collab_spawn, memory_consolidation) only on calls
  // made for a sub-agent or side task, so the main agent stays `main` and those calls are named by
  // their kind. `thread-id` is left out: it is present on every main call, so it would rename the
  // main agent to a uuid, and the sub-agent header already wins for the others. Known limit:
  // concurrent `collab_spawn` children share the one name (each has its own `thread-id`, but no
  // single header is absent for main and unique per child).
  agentHeaders: ['x-openai-subagent'],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    const dir = codexHome(configHome(ctx));
    await privateDirs(configHome(ctx), dir);
    const file = join(dir, 'config.toml');
    await writePrivateFile(file, codexConfigToml(ctx));
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = { ...baseEnv, HOME: ctx.home, CODEX_HOME: codexHome(ctx.home), [KEY_VAR]: ctx.apiKey };
    if (prompt === null) {
      return { file: bin, args: ['--dangerously-bypass-approvals-and-sandbox', '-m', ctx.model, ...extraArgs], env };
    }
    // `--` keeps a prompt that starts with `-`, or is a subcommand's name (`resume`, `review`), a prompt.
    const args = ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--json', '-m', ctx.model, ...extraArgs, '--', prompt];
    return { file: bin, args, env };
  },
};
