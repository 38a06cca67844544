import type { Store } from '../store/store.js';
import type { ServedTask } from './request.js';
import type { Cut } from './results.js';
import type { ServedRun } from './served-run.js';

/** Where a served task's model calls are held around a weight update: every capture proxy's gates. */
export interface InferenceState {
  paused: boolean;
  inflight: number;
}

/**
 * Where `polar serve` runs a task's sessions: on this machine (LocalBackend: the rollout stages in
 * pools shared by every task) or on `polar worker`s anywhere (QueueBackend: the shared PostgreSQL
 * store and queue). The service above it (service.ts) is the same for both: Polar's routes, early
 * stop, cancellation, results, callbacks.
 */
export interface TaskBackend {
  /** What results are read from: the sessions, samples and calls of every task. */
  readonly store: Store;
  /** Makes the task's rollout (its one task, num_samples samples) and returns its id; the samples wait to run. */
  record(served: ServedTask): Promise<string>;
  /** Runs the task's samples until each has ended, calling `ended` as each does (in the order they end). */
  run(run: ServedRun, ended: (sampleId: string) => void): Promise<void>;
  /** Cuts off every sample of `run` that has no result yet, each recorded in `run.cuts` as `cut`; their harnesses are ended. */
  cut(run: ServedRun, cut: Cut): Promise<void>;
  /** Sessions waiting for a slot (or a worker), over every task. */
  pending(): number | Promise<number>;
  /** Holds new model calls until resume; answers once those in flight ended or `timeoutMs` passed. */
  pause(timeoutMs: number): Promise<InferenceState>;
  resume(): Promise<InferenceState>;
  inference(): Promise<InferenceState>;
  /** After every task has ended: closes what the backend opened. */
  close(): Promise<void>;
}
