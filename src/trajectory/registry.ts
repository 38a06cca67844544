import { PolarError } from '../core/errors.js';
import { perRequest } from './strategies/per-request.js';
import { createPrefixMerging, prefixMerging } from './strategies/prefix-merging.js';
import type { Strategy } from './types.js';

/** Strategies by name; a new one is added here and nowhere else. */
export const STRATEGIES: Readonly<Record<string, Strategy>> = {
  [perRequest.name]: perRequest,
  [prefixMerging.name]: prefixMerging,
};

export function getStrategy(name: string, options: { allowRerender?: boolean } = {}): Strategy {
  const strategy = STRATEGIES[name];
  if (!strategy) throw new PolarError('POLAR_USAGE', `unknown --strategy ${name}; choose one of: ${Object.keys(STRATEGIES).join(', ')}`);
  if (options.allowRerender) {
    if (name !== prefixMerging.name) throw new PolarError('POLAR_USAGE', '--allow-rerender applies to --strategy prefix-merging only');
    return createPrefixMerging({ allowRerender: true });
  }
  return strategy;
}
