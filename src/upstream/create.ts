import { PolarError } from '../core/errors.js';
import type { UpstreamHttpOptions } from './http.js';
import { createOpenAIUpstream } from './openai/index.js';
import { UPSTREAM_KINDS, type Upstream, type UpstreamKind } from './types.js';
import { createVllmUpstream } from './vllm/index.js';

const FACTORIES: Record<UpstreamKind, (options: UpstreamHttpOptions) => Upstream> = {
  vllm: createVllmUpstream,
  openai: createOpenAIUpstream,
};

export function createUpstream(kind: string, options: UpstreamHttpOptions): Upstream {
  if (!(UPSTREAM_KINDS as readonly string[]).includes(kind)) {
    throw new PolarError('POLAR_USAGE', `unknown --upstream-kind ${kind}; choose one of: ${UPSTREAM_KINDS.join(', ')}`, 2);
  }
  return FACTORIES[kind as UpstreamKind](options);
}
