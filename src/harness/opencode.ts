/**
 * opencode (`opencode-ai`), config checked against 1.18.33 by running it headless against the
 * recording stub in /tmp/fixture-rec (three `POST …/chat/completions`: a title request, then the
 * tool-call and final turns; exit 0). Facts relied on, from harnesses.md §7, `opencode --help` and the
 * 1.18.33 binary:
 * - `OPENCODE_CONFIG` names an extra config file, merged over `~/.config/opencode/` (private here,
 *   since HOME is). A provider with `npm: "@ai-sdk/openai-compatible"` is bundled, so nothing is
 *   installed for it; its `options.baseURL` gets `/chat/completions` appended. `{env:NAME}` in
 *   `apiKey` keeps the key out of the file.
 * - `permission: "allow"` resolves to `{"*": "allow"}` (`opencode debug config`): no prompts.
 * - It fetches the model catalogue from models.opencode.ai at start (logged as an error offline);
 *   `OPENCODE_DISABLE_MODELS_FETCH=1` skips that. `autoupdate: false` and
 *   `OPENCODE_DISABLE_AUTOUPDATE=1` stop update checks; `OPENCODE_DISABLE_LSP_DOWNLOAD=1` stops
 *   language-server downloads. Not stoppable in 1.18.33: a detached background install of
 *   `@opencode-ai/plugin` into each config dir, from the npm registry; it is non-fatal offline.
 * - `small_model` is pinned too: the title request (logged `small=true`) then asks for the served model
 *   rather than whatever small model opencode would pick.
 */
import { join } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

const KEY_VAR = 'POLAR_API_KEY';

/**
 * opencode sends `limit.output` as `max_tokens`, and 32000 when no limit is configured (recorded
 * against the stub); keep that, but never more than a quarter of a small window, since opencode
 * budgets its input as the window minus the output.
 */
export function opencodeOutputLimit(contextWindow: number): number {
  return Math.min(32000, Math.floor(contextWindow / 4));
}

/** opencode's extra config file, under a private home (the harness's view for its env, polar's for writing). */
export function opencodeConfigPath(home: string): string {
  return join(home, 'opencode.json');
}

export function opencodeConfig(ctx: HarnessContext): unknown {
  const model: Record<string, unknown> = { name: ctx.model };
  if (ctx.contextWindow !== null) model.limit = { context: ctx.contextWindow, output: opencodeOutputLimit(ctx.contextWindow) };
  return {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      polar: {
        npm: '@ai-sdk/openai-compatible',
        name: 'polar',
        options: { baseURL: sessionUrls(ctx).v1, apiKey: `{env:${KEY_VAR}}` },
        models: { [ctx.model]: model },
      },
    },
    model: `polar/${ctx.model}`,
    small_model: `polar/${ctx.model}`,
    autoupdate: false,
    share: 'disabled',
    permission: 'allow',
    // 1.18.33: `compaction.auto: false` stops both the compaction at the window and the one on a
    // context-overflow error (the session ends with the error); pruning old tool outputs is off by
    // default, and is said off here so a later default cannot turn it on.
    ...(ctx.appendOnly ? { compaction: { auto: false, prune: false } } : {}),
  };
}

export const opencode: Harness = {
  name: 'opencode',
  provider: 'openai-chat',
  packageName: 'opencode-ai',
  binName: 'opencode',
  appendOnlyGap: null,
  // Recorded against the stub: every call of a session sends `x-session-id` and `x-session-affinity`
  // (the opencode session id, the same for the whole main agent). In 1.18.33's request builder a
  // child session (a `task` sub-agent) also sends `x-parent-session-id`; main never does. So main
  // stays `main` and sub-agent calls are named by their parent session. Siblings share that name;
  // `x-session-id` would tell them apart but would also rename the main agent.
  agentHeaders: ['x-parent-session-id'],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    await privateDirs(configHome(ctx));
    const file = opencodeConfigPath(configHome(ctx));
    await writePrivateFile(file, `${JSON.stringify(opencodeConfig(ctx), null, 2)}\n`);
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = {
      ...baseEnv,
      HOME: ctx.home,
      OPENCODE_CONFIG: opencodeConfigPath(ctx.home),
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
      [KEY_VAR]: ctx.apiKey,
    };
    const model = ['-m', `polar/${ctx.model}`];
    if (prompt === null) return { file: bin, args: [...model, ...extraArgs], env };
    // `--` keeps a prompt that starts with `-` from being parsed as options.
    return { file: bin, args: ['run', '--format', 'json', ...model, ...extraArgs, '--', prompt], env };
  },
};
