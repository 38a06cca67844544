/**
 * Pi (`@mariozechner/pi-coding-agent`), config checked against 0.73.1 by recording it against a stub
 * server (fixtures/requests/pi). Facts relied on, from harnesses.md §5 and the package's
 * docs/models.md:
 * - There is no base-URL env var: a provider in `$PI_CODING_AGENT_DIR/models.json` points it here.
 *   `apiKey` is required and may name an env var, which keeps the key out of the file.
 * - For a `reasoning` model on `openai-completions` pi sends the system prompt as a `developer`
 *   message (see fixtures/requests/pi/01-first-call.json), which Qwen chat templates drop; model-level
 *   `compat.supportsDeveloperRole: false` makes it a `system` message.
 * - `--offline` / `PI_OFFLINE=1` and `PI_SKIP_VERSION_CHECK=1` stop the version check and the
 *   `fd`/`rg` downloads from GitHub.
 * - No permission prompts and no sub-agents.
 */
import { join } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

const KEY_VAR = 'POLAR_API_KEY';

/**
 * The output cap the recorded run used (pi's own default is 16384), and at most a quarter of a small
 * window so the prompt keeps room.
 */
export function piMaxTokens(contextWindow: number | null): number {
  return contextWindow === null ? 8192 : Math.min(8192, Math.floor(contextWindow / 4));
}

/** Pi's private agent dir (models.json, sessions, settings) under a private home: never the user's ~/.pi/agent. */
export function piAgentDir(home: string): string {
  return join(home, '.pi', 'agent');
}

export function piModelsJson(ctx: HarnessContext): unknown {
  return {
    providers: {
      polar: {
        baseUrl: sessionUrls(ctx).v1,
        api: 'openai-completions',
        apiKey: KEY_VAR,
        models: [
          {
            id: ctx.model,
            name: ctx.model,
            reasoning: true,
            input: ['text'],
            // Omitted when unknown: pi then assumes 128000.
            ...(ctx.contextWindow !== null ? { contextWindow: ctx.contextWindow } : {}),
            maxTokens: piMaxTokens(ctx.contextWindow),
            cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
            compat: { supportsDeveloperRole: false },
          },
        ],
      },
    },
  };
}

export const PI_APPEND_ONLY_SETTINGS = { compaction: { enabled: false } } as const;

export const pi: Harness = {
  name: 'pi',
  provider: 'openai-chat',
  packageName: '@mariozechner/pi-coding-agent',
  binName: 'pi',
  appendOnlyGap: null,
  // Pi has no sub-agents, and its recorded calls (fixtures/requests/pi/*.json) carry only the SDK's
  // own headers.
  agentHeaders: [],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    const home = configHome(ctx);
    const dir = piAgentDir(home);
    await privateDirs(home, join(home, '.pi'), dir);
    const file = join(dir, 'models.json');
    await writePrivateFile(file, `${JSON.stringify(piModelsJson(ctx), null, 2)}\n`);
    // One switch holds both of pi's compactions (0.73.1): at window − reserveTokens, and on a
    // provider's context-overflow error (agent-session.js returns before either when disabled); an
    // overflow then ends the run with the error. Read from $PI_CODING_AGENT_DIR/settings.json.
    if (ctx.appendOnly) await writePrivateFile(join(dir, 'settings.json'), `${JSON.stringify(PI_APPEND_ONLY_SETTINGS, null, 2)}\n`);
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = {
      ...baseEnv,
      HOME: ctx.home,
      PI_CODING_AGENT_DIR: piAgentDir(ctx.home),
      PI_OFFLINE: '1',
      PI_SKIP_VERSION_CHECK: '1',
      [KEY_VAR]: ctx.apiKey,
    };
    const model = ['--provider', 'polar', '--model', ctx.model];
    if (prompt === null) return { file: bin, args: ['--offline', ...model, ...extraArgs], env };
    // Pi's parser has no `--`: a prompt starting with `-` is read as an option and one starting with
    // `@` as a file to attach (pi's own CLI semantics, kept as they are).
    return { file: bin, args: ['--offline', '--no-session', '--mode', 'json', ...model, ...extraArgs, prompt], env };
  },
};
