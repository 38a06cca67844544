import type { MockServer } from '../../src/mock-server/server.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import type { GymAgentOptions } from '../../src/train/gym-agent/agent.js';
import { patientSeconds } from './patience.js';

export interface MockGymAgent {
  mock: MockServer;
  dbPath: string;
  outDir: string;
  tasksFile: string;
  /** Collects the agent's notices. */
  notices: string[];
}

/**
 * An in-process gym agent the way the closed-doors tests start one: the custom harness `true` on the
 * loopback, the mock server's model as NeMo-RL serves it, one sample at a time, no sandbox, the task
 * file's tasks; `extra` last, so a test changes what it probes.
 */
export function mockGymAgentOptions(o: MockGymAgent, extra: Partial<GymAgentOptions> = {}): GymAgentOptions {
  return {
    harness: 'custom',
    command: 'true',
    dbPath: o.dbPath,
    host: '127.0.0.1',
    port: 0,
    upstreams: [`${o.mock.url}/v1`],
    upstreamKind: 'nemo-rl',
    model: o.mock.model,
    // NeMo-RL's server lists no models: the window is given, as polar train passes it.
    contextWindow: o.mock.maxModelLen,
    concurrency: 1,
    timeoutSec: patientSeconds(60),
    sandbox: 'none',
    outDir: o.outDir,
    tasks: { file: o.tasksFile, tasks: readTaskFile(o.tasksFile) },
    onNotice: (line) => o.notices.push(line),
    ...extra,
  };
}
