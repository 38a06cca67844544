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
import { join } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

/**
 * Qwen Code's history rewrites, held off where a setting reaches them (0.24.4). Its auto-compaction
 * has no off switch: it fires at min(0.85 × W, W − 33,000) and a harder tier at W − 23,000, W being
 * `model.generationConfig.contextWindowSize`. So it is told a window far past the model's, and
 * `model.sessionTokenLimit` (checked before each send against the last prompt) ends the session
 * before the model's own window is reached, at nine tenths of it. The micro-compaction that clears
 * old tool results (after an hour idle, or past 500,000 characters of them) is off with
 * `toolResultsThresholdMinutes: -1`. Left: one reactive compression when the server answers a send
 * with a context-length error, which only a step that adds more than a tenth of the window can reach.
 */
export function qwenSettings(contextWindow: number | null, appendOnly: boolean): Record<string, unknown> | null {
  // Its defaults: no settings file, so it assumes a window by the model's name (256k for `qwen…`,
  // else 200,000). Told a real small window it would compact at once and go on compacting: at
  // 40,960 its threshold, min(0.85 W, W − 33,000), is 7,960 tokens, below its own ~17k first prompt.
  if (!appendOnly) return null;
  return {
    model: {
      ...(contextWindow !== null ? { generationConfig: { contextWindowSize: contextWindow * 100 }, sessionTokenLimit: Math.floor(contextWindow * 0.9) } : {}),
    },
    context: { clearContextOnIdle: { toolResultsThresholdMinutes: -1 } },
  };
}

export const qwenCode: Harness = {
  name: 'qwen-code',
  provider: 'openai-chat',
  packageName: '@qwen-code/qwen-code',
  binName: 'qwen',
  appendOnlyGap:
    'Qwen Code compresses its history once when the server answers that the context is full (no setting stops it in 0.24.4); polar ends its sessions at nine tenths of the window first, so only a step that adds more than a tenth of the window at once can still split a sample',
  minNodeMajor: 22,
  // The recorded calls (fixtures/requests/qwen-code/*.json) carry only the OpenAI SDK's own headers;
  // nothing names a sub-agent, so there is nothing to read.
  agentHeaders: [],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    // The env carries the provider; an otherwise empty private HOME keeps the user's ~/.qwen out.
    await privateDirs(configHome(ctx));
    const settings = qwenSettings(ctx.contextWindow, ctx.appendOnly);
    if (!settings) return;
    await privateDirs(configHome(ctx), join(configHome(ctx), '.qwen'));
    await writePrivateFile(join(configHome(ctx), '.qwen', 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
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
