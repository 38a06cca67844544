export { createUpstream } from './create.js';
export { TokenAccumulator } from './accumulate.js';
export { normalizeBaseUrl } from './openai-compatible.js';
export { UPSTREAM_KINDS, type Upstream, type UpstreamKind, type UpstreamChunk, type UpstreamCompletion, type UpstreamRequest, type TokenDelta, type ServedModel } from './types.js';
