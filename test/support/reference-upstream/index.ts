import { startMockServer, type MockServer, type MockServerOptions } from '../../../src/mock-server/server.js';
import { echoScript } from './echo-script.js';

/** The mock server with the tests' echo script (unless a test brings its own). */
export function startReferenceUpstream(options: MockServerOptions = {}): Promise<MockServer> {
  return startMockServer({ script: echoScript, ...options });
}

export type {
  MockServer as ReferenceUpstream,
  MockServerOptions as ReferenceUpstreamOptions,
  FaultMode,
  ChatBody,
  LoggedCall,
} from '../../../src/mock-server/server.js';
export { textOf, MAX_MODEL_LEN } from '../../../src/mock-server/server.js';
export { echoScript } from './echo-script.js';
export { loadQwen3, qwen3ModelDir, type Qwen3 } from '../../../src/mock-server/qwen3.js';
export { sampleReply, sampleIds, logprobsFor, type SampledReply, type ScriptedReply } from '../../../src/mock-server/sampler.js';
