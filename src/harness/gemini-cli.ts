/**
 * Gemini CLI (`@google/gemini-cli`), config checked against 0.61.0 by recording it against a stub
 * server (fixtures/requests/gemini-cli). Facts relied on, from harnesses.md §6:
 * - `GOOGLE_GEMINI_BASE_URL` is the root with no version suffix (the SDK adds `/v1beta/models/…`);
 *   plain http is accepted only for loopback hosts.
 * - With env vars alone 0.61.0 stops with "Invalid auth method selected."; it needs
 *   `security.auth.selectedType: "gemini-api-key"` in `$GEMINI_CLI_HOME/.gemini/settings.json`.
 * - `--approval-mode yolo` is forced back to `default` in untrusted folders: `--skip-trust` and
 *   `GEMINI_CLI_TRUST_WORKSPACE=true`.
 * - It re-spawns itself with a larger heap unless `GEMINI_CLI_NO_RELAUNCH=true`, which would put a
 *   second process between polar and the one doing the work.
 * - `-m` is given because the default, `auto`, routes through a flash-lite classifier call.
 */
import { join } from 'node:path';
import { privateDirs, writePrivateFile } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

/**
 * Gemini CLI reads `<GEMINI_CLI_HOME>/.gemini/`; the private home stands in for the user's. Its
 * project temp folder is `~/.gemini/tmp/<hash of the cwd>`, named in its first prompt: a fixed home
 * and cwd keep it one text for every sample.
 */
export function geminiSettingsPath(home: string): string {
  return join(home, '.gemini', 'settings.json');
}

export const GEMINI_SETTINGS = {
  security: { auth: { selectedType: 'gemini-api-key' } },
  privacy: { usageStatisticsEnabled: false },
  general: { enableAutoUpdate: false },
} as const;

/**
 * Gemini CLI's history rewrites (read in the 0.61.0 bundle). Chat compression fires when the last
 * prompt reaches `model.compressionThreshold` (0.5) × its token limit, which for a model name it does
 * not know is 1,048,576 and which no setting changes; a threshold of 1 keeps it at the limit itself.
 * Shell output is truncated as it enters the history, never after, and the LLM summary of tool output
 * is off by default. Not reachable: tool-output masking (ToolOutputMaskingService, run before every
 * send) replaces old tool results with a placeholder once more than 30,000 tokens of them lie beyond
 * the newest 50,000 (its estimate, 4 characters a token). Its settings schema names
 * `contextManagement.tools.outputMasking`, but the CLI passes its core only
 * `contextManagement.enabled` (gemini-*.js loadCliConfig), so the thresholds stay the defaults.
 */
export const GEMINI_APPEND_ONLY_SETTINGS = { model: { compressionThreshold: 1 } } as const;

export function geminiSettings(appendOnly: boolean): Record<string, unknown> {
  return appendOnly ? { ...GEMINI_SETTINGS, ...GEMINI_APPEND_ONLY_SETTINGS } : GEMINI_SETTINGS;
}

export const geminiCli: Harness = {
  name: 'gemini-cli',
  provider: 'google-generate-content',
  packageName: '@google/gemini-cli',
  binName: 'gemini',
  appendOnlyGap:
    'Gemini CLI 0.61.0 replaces old tool outputs with a placeholder once more than 80,000 tokens of them (its estimate, 4 characters a token) are in the history, and no setting reaches that; a session that reads that much tool output splits (at windows under about 100,000 tokens the window ends it first)',
  // The recorded calls (fixtures/requests/gemini-cli/*.json) carry no header that names an agent:
  // main turns and the router's classifier call send the same header set. Nothing to read.
  agentHeaders: [],

  async writeConfig(ctx: HarnessContext): Promise<void> {
    const home = configHome(ctx);
    const file = geminiSettingsPath(home);
    await privateDirs(home, join(home, '.gemini'));
    await writePrivateFile(file, `${JSON.stringify(geminiSettings(ctx.appendOnly), null, 2)}\n`);
  },

  command(bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
    const env = {
      ...baseEnv,
      HOME: ctx.home,
      GEMINI_CLI_HOME: ctx.home,
      GOOGLE_GEMINI_BASE_URL: sessionUrls(ctx).root,
      GEMINI_API_KEY: ctx.apiKey,
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      GEMINI_CLI_NO_RELAUNCH: 'true',
    };
    const common = ['--approval-mode=yolo', '--skip-trust', '-m', ctx.model];
    if (prompt === null) return { file: bin, args: [...common, ...extraArgs], env };
    // `--prompt=` keeps a prompt that starts with `-` from being parsed as options.
    return { file: bin, args: [`--prompt=${prompt}`, ...common, '-o', 'stream-json', ...extraArgs], env };
  },
};
