/**
 * A harness polar has no adapter for, given as a command-line template, e.g.
 * `mycli --base {base_url} --model {model} {prompt}`. Placeholders are replaced by shell-quoted
 * values and the line runs under `/bin/sh -c`, so a prompt with quotes, `$(…)` or backticks stays
 * literal text. The env also carries the usual redirect variables of the OpenAI, Anthropic and
 * Google SDKs (URLs with the session in the path, per harnesses.md §0), so many CLIs need no flags.
 * `{api_key}` becomes `"$POLAR_API_KEY"`, expanded by the shell from the env: the session key is a
 * capability and stays out of `sh -c`'s argv (which `ps` shows); a CLI that is handed it as an
 * argument still sees it in its own argv, so prefer the env variables below where the CLI reads them.
 * Not checked against any particular CLI.
 */
import { shellQuote } from '../core/process/shell.js';
import { PolarError } from '../core/errors.js';
import { privateDirs } from './private-files.js';
import type { Harness, HarnessCommand, HarnessContext } from './types.js';
import { configHome, sessionUrls } from './types.js';

export const CUSTOM_PLACEHOLDERS = ['base_url', 'base_root', 'model', 'session', 'api_key', 'prompt'] as const;
type Placeholder = (typeof CUSTOM_PLACEHOLDERS)[number];

const PLACEHOLDER = /\{([a-z_]+)\}/g;

/** The env variable `{api_key}` expands from. */
const KEY_VAR = 'POLAR_API_KEY';

function isPlaceholder(name: string): name is Placeholder {
  return (CUSTOM_PLACEHOLDERS as readonly string[]).includes(name);
}

/** Throws on `{name}` that is not a placeholder (a typo would otherwise reach the CLI as text). */
function checkTemplate(template: string): void {
  if (template.trim() === '') throw new PolarError('POLAR_USAGE', 'the custom harness needs a command template');
  for (const m of template.matchAll(PLACEHOLDER)) {
    const name = m[1] ?? '';
    // `${name}` is shell parameter expansion, left to the shell.
    if (template[(m.index ?? 0) - 1] === '$' || isPlaceholder(name)) continue;
    throw new PolarError('POLAR_USAGE', `unknown placeholder {${name}} in the custom command; known: ${CUSTOM_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}`);
  }
}

/** The shell line: one pass, so a substituted value is never scanned for placeholders again. */
export function renderTemplate(template: string, ctx: HarnessContext, prompt: string | null, extraArgs: readonly string[]): string {
  const { root, v1 } = sessionUrls(ctx);
  const values: Record<Exclude<Placeholder, 'api_key'>, string | null> = {
    base_url: v1,
    base_root: root,
    model: ctx.model,
    session: ctx.session,
    // Interactive: `{prompt}` becomes nothing rather than an empty argument.
    prompt,
  };
  const line = template.replace(PLACEHOLDER, (whole: string, name: string, offset: number) => {
    if (template[offset - 1] === '$' || !isPlaceholder(name)) return whole;
    if (name === 'api_key') return `"$${KEY_VAR}"`;
    const value = values[name];
    return value === null ? '' : shellQuote(value);
  });
  return [line, ...extraArgs.map(shellQuote)].join(' ');
}

export function createCustomHarness(template: string): Harness {
  checkTemplate(template);
  return {
    name: 'custom',
    provider: 'openai-chat',
    packageName: null,
    binName: 'sh',
    // Polar's own header (README, "Agents"): a custom harness can name its sub-agents with it.
    agentHeaders: ['x-polar-agent'],
    appendOnlyGap:
      'polar cannot configure a custom command: switch its compaction or history trimming off yourself, or its samples can split into several traces (masked in training)',

    async writeConfig(ctx: HarnessContext): Promise<void> {
      await privateDirs(configHome(ctx));
    },

    command(_bin, ctx, prompt, extraArgs, baseEnv): HarnessCommand {
      const { root, v1 } = sessionUrls(ctx);
      const env = {
        ...baseEnv,
        HOME: ctx.home,
        POLAR_BASE_URL: v1,
        POLAR_SESSION: ctx.session,
        POLAR_MODEL: ctx.model,
        [KEY_VAR]: ctx.apiKey,
        OPENAI_BASE_URL: v1,
        OPENAI_API_KEY: ctx.apiKey,
        ANTHROPIC_BASE_URL: root,
        ANTHROPIC_API_KEY: ctx.apiKey,
        GOOGLE_GEMINI_BASE_URL: root,
        GEMINI_API_KEY: ctx.apiKey,
      };
      // Always /bin/sh (POSIX, present everywhere), whatever `sh` resolved to on PATH.
      return { file: '/bin/sh', args: ['-c', renderTemplate(template, ctx, prompt, extraArgs)], env };
    },
  };
}
