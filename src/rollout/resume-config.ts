import { PolarError } from '../core/errors.js';
import { TRAINER_THINKING } from '../upstream/sampling-policy.js';
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
  // The stored pair is what every call of the rollout is judged against (trajectory/on-policy.ts):
  // changed halfway, the samples that already ran would read as off-policy, and a group would mix
  // two sampling distributions. A new pair is a new rollout.
  for (const [key, flag] of [
    ['temperature', '--temperature'],
    ['topP', '--top-p'],
  ] as const) {
    const asked = upstream?.[key];
    if (asked !== undefined && asked !== (stored.upstream[key] ?? 1))
      throw new PolarError(
        'POLAR_USAGE',
        `${flag} ${asked} differs from the rollout's ${stored.upstream[key] ?? 1}: its samples so far were sampled with that, and a group must not mix two. Resume without ${flag}, or start a new rollout`,
      );
  }
  // The thinking switch likewise: it chose the prompt every sample so far was conditioned on.
  const thinking = upstream?.thinking;
  if (thinking !== undefined && thinking !== (stored.upstream.thinking ?? TRAINER_THINKING))
    throw new PolarError(
      'POLAR_USAGE',
      `--thinking ${thinking} differs from the rollout's ${stored.upstream.thinking ?? TRAINER_THINKING}: its samples so far were rendered with that, and a group must not mix two prompts. Resume without --thinking, or start a new rollout`,
    );
  return { ...stored, ...rest, upstream: { ...stored.upstream, ...upstream } };
}
