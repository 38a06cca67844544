/**
 * Qwen Code (`@qwen-code/qwen-code`), config checked against 0.24.4 by recording it against a stub
 * server under Node 22 (fixtures/requests/qwen-code). Facts relied on, from harnesses.md §4:
 * - The env selects OpenAI auth only when `OPENAI_API_KEY`, `OPENAI_MODEL` and `OPENAI_BASE_URL` are
 *   all set; the SDK appends `/chat/completions` to the v1 URL.
 * - `~/.qwen/settings.json` (`model.name`, `modelProviders.*.baseUrl`) overrides those variables, and
 *   `.env` files are loaded from home: HOME is a private, empty dir so nothing of the user's applies.
 * - Its 240 s chunk-inactivity watchdog is disabled with `QWEN_STREAM_IDLE_TIMEOUT_MS=0`; the proxy
 *   may hold a stream open while the upstream works (§1.1).
 * - Node >= 22 (older Node fails at parse time).
 */
import { privateDirs } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

export const qwenCode: Harness = {
  name: 'qwen-code',
  provider: 'openai-chat',
  packageName: '@qwen-code/qwen-code',
  binName: 'qwen',
  minNodeMajor: 22,
  // The recorded calls (fixtures/requests/qwen-code/*.json) carry only the OpenAI SDK's own headers;
  // nothing names a sub-agent, so there is nothing to read.
  agentHeaders: [],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    // No config file: the env carries everything, and an empty private HOME keeps ~/.qwen out.
    await privateDirs(configHome(ctx));
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = {
      ...baseEnv,
      HOME: ctx.home,
      OPENAI_BASE_URL: sessionUrls(ctx).v1,
      OPENAI_API_KEY: ctx.apiKey,
      OPENAI_MODEL: ctx.model,
      QWEN_STREAM_IDLE_TIMEOUT_MS: '0',
    };
    if (prompt === null) return { file: bin, args: ['--yolo', ...extraArgs], env };
    // `--prompt=` keeps a prompt that starts with `-` from being parsed as options.
    return { file: bin, args: ['--yolo', `--prompt=${prompt}`, '--output-format', 'stream-json', ...extraArgs], env };
  },
};
