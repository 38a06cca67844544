import path from 'node:path';
import { sandboxKind } from '../sandbox-options.js';
import { startMockServer } from '../../mock-server/server.js';
import { mockTasksFrom } from '../../mock-server/tasks.js';
import { loadTasks } from '../../rollout/load-tasks.js';
import { defaultDbPath } from '../../store/store.js';
import { newArgs } from './rollout/flags.js';
import { executeRollout } from './rollout/run.js';

/** The fixture task set that ships with polar (six small real tasks, each with its evaluator). */
export const FIXTURE_TASKS = path.resolve(import.meta.dirname, '..', '..', '..', 'fixtures', 'tasks', 'tasks.jsonl');

/**
 * `polar demo --rollout`: the fixture tasks × 4 samples with a real harness against the mock model,
 * whose scripted correct and wrong solutions (alternating per task, seeded) give every group mixed
 * rewards, then the groups with their rewards and advantages. No GPU.
 */
export async function demoRollout(opts: { harness: string; db?: string; node?: string; json?: boolean; samples?: number; tasks?: string }): Promise<void> {
  const file = opts.tasks ?? FIXTURE_TASKS;
  // Skipped tasks are said once, by newArgs below.
  const tasks = loadTasks(file, () => {});
  const mock = await startMockServer({ log: false, tasks: mockTasksFrom(tasks), seed: 0 });
  try {
    const args = newArgs(
      {
        tasks: file,
        harness: opts.harness,
        upstream: mock.url,
        upstreamKind: 'vllm',
        samples: opts.samples ?? 4,
        concurrency: 2,
        initWorkers: 2,
        postWorkers: 2,
        timeout: 300,
        // The fixtures run offline in polar's sandbox; an engine that works would build their images
        // from Docker Hub instead.
        environment: 'host',
        ...(opts.node ? { node: opts.node } : {}),
      },
      sandboxKind({}),
    );
    await executeRollout(
      { dbPath: opts.db ?? defaultDbPath(), ...args },
      { json: opts.json === true },
      { mock: 'scripted correct and wrong solutions, alternating per task' },
    );
  } finally {
    await mock.close();
  }
}
