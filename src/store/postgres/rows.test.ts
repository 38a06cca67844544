import { describe, expect, it } from 'vitest';
import { pgMember, pgRollout, pgSample } from './rows.js';

const SAMPLE = {
  id: 'rol_1:t:0',
  rollout_id: 'rol_1',
  task_id: 't',
  sample_index: 0,
  group_id: 'rol_1/t',
  attempt: 2,
  session_id: 'ses_1',
  status: 'completed',
  error_stage: null,
  error: null,
  reward: 0.5,
  trace_rewards: '[0.5]',
  evaluator: '{"exit":0}',
  diff: null,
  accepted: 1,
  advantage: 0.25,
  loo_advantage: null,
  timing: '{"run_ms":3}',
  started_at: 10,
  ended_at: 20,
  worker: 'host/1',
};

describe('typed PostgreSQL rows', () => {
  it('reads a sample row into the same shape as a SQLite one', () => {
    expect(pgSample(SAMPLE)).toMatchObject({
      id: 'rol_1:t:0',
      rolloutId: 'rol_1',
      attempt: 2,
      status: 'completed',
      traceRewards: [0.5],
      evaluator: { exit: 0 },
      accepted: true,
      timing: { run_ms: 3 },
      worker: 'host/1',
    });
    expect(pgMember({ id: 'a', status: 'failed', reward: null, accepted: 0 })).toEqual({ id: 'a', status: 'failed', reward: null, accepted: false });
  });

  it('names the table and column whose value is not what the schema says', () => {
    expect(() => pgSample({ ...SAMPLE, attempt: '2' })).toThrow(/samples\.attempt .* expected a number/);
    expect(() => pgSample({ ...SAMPLE, status: 'lost' })).toThrow(/samples\.status .* expected queued \|/);
    const { worker: _w, ...missing } = SAMPLE;
    expect(() => pgSample(missing)).toThrow(/samples\.worker in PostgreSQL is missing/);
  });

  it('reads a rollout row, its config parsed', () => {
    const row = {
      id: 'rol_1',
      created_at: 1,
      ended_at: null,
      status: 'running',
      harness: 'custom',
      upstream_url: 'http://x',
      upstream_kind: 'vllm',
      served_model: null,
      samples_per_task: 3,
      tasks_file: null,
      accept: null,
      config: '{"timeoutSec":60}',
    };
    expect(pgRollout(row)).toMatchObject({ id: 'rol_1', status: 'running', samplesPerTask: 3, config: { timeoutSec: 60 } });
  });
});
