import type { RolloutConfig } from './config.js';

/**
 * What a `--resume` changes in a stored rollout's configuration: only the flags given again. The
 * upstream is changed field by field, so a moved server (`--upstream URL`) keeps the stored kind,
 * tokenizer, tool parser and sampling settings: a token-in rollout resumed with only a new URL must
 * still render prompts and send token ids, or its resumed samples are captured by another path
 * (chat, no tokenizer) and cannot be checked against their text nor merged like the others.
 */
export type RolloutOverrides = Partial<Omit<RolloutConfig, 'upstream'>> & { upstream?: Partial<RolloutConfig['upstream']> };

/** The stored configuration with a resume's overrides applied (the upstream merged field by field). */
export function resumedConfig(stored: RolloutConfig, overrides: RolloutOverrides = {}): RolloutConfig {
  const { upstream, ...rest } = overrides;
  return { ...stored, ...rest, upstream: { ...stored.upstream, ...upstream } };
}
