import { PolarError } from '../core/errors.js';
import { claudeCode } from './claude-code.js';
import { codex } from './codex.js';
import { createCustomHarness } from './custom.js';
import { geminiCli } from './gemini-cli.js';
import { opencode } from './opencode.js';
import { pi } from './pi.js';
import { qwenCode } from './qwen-code.js';
import type { Harness, HarnessName } from './types.js';

export const HARNESS_NAMES: readonly HarnessName[] = ['claude-code', 'codex', 'gemini-cli', 'qwen-code', 'pi', 'opencode', 'custom'];

const ADAPTERS: Readonly<Record<Exclude<HarnessName, 'custom'>, Harness>> = {
  'claude-code': claudeCode,
  codex,
  'gemini-cli': geminiCli,
  'qwen-code': qwenCode,
  pi,
  opencode,
};

function isHarnessName(name: string): name is HarnessName {
  return (HARNESS_NAMES as readonly string[]).includes(name);
}

/** The adapter for a harness name; `custom` is built from `options.command`, its command template. */
export function getHarness(name: string, options: { command?: string } = {}): Harness {
  if (!isHarnessName(name)) {
    throw new PolarError('POLAR_USAGE', `unknown harness "${name}"; expected one of: ${HARNESS_NAMES.join(', ')}`);
  }
  if (name !== 'custom') return ADAPTERS[name];
  if (options.command === undefined || options.command.trim() === '') {
    throw new PolarError('POLAR_USAGE', 'the custom harness needs a command template (--command), e.g. "mycli --base {base_url} --model {model} {prompt}"');
  }
  return createCustomHarness(options.command);
}
