export { startReferenceUpstream, defaultScript, textOf, MAX_MODEL_LEN, type ReferenceUpstream, type ReferenceUpstreamOptions, type FaultMode, type ChatBody, type LoggedCall } from './server.js';
export { loadQwen3, qwen3ModelDir, type Qwen3 } from './qwen3.js';
export { sampleReply, sampleIds, logprobsFor, type SampledReply, type ScriptedReply } from './sampler.js';
