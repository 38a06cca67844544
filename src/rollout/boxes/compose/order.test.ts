import { describe, expect, it } from 'vitest';
import { beforeMain, startOrder } from './order.js';
import type { ComposeService, DependsOn, MainOverrides } from './plan.js';

const hc = { command: 'true', intervalSec: 1, timeoutSec: 1, startPeriodSec: 0, startIntervalSec: 1, retries: 1 };
function svc(name: string, dependsOn: DependsOn[] = [], healthy = false): ComposeService {
  return { name, image: { kind: 'ref', ref: 'x' }, env: {}, healthcheck: healthy ? hc : null, dependsOn, aliases: [] };
}
const main = (dependsOn: DependsOn[] = []): MainOverrides => ({ dependsOn, env: {}, healthcheck: null, aliases: [] });
const on = (service: string, condition: DependsOn['condition'] = 'service_started'): DependsOn => ({ service, condition });

describe('startOrder', () => {
  it('puts dependencies first and keeps the file’s order otherwise', () => {
    const steps = startOrder({ services: [svc('web', [on('api')]), svc('cache'), svc('api', [on('db', 'service_healthy')]), svc('db')] });
    expect(steps.map((s) => s.service)).toEqual(['db', 'api', 'web', 'cache']);
    expect(steps[1]?.waitFor).toEqual([on('db', 'service_healthy')]);
  });

  it('refuses a cycle, naming it', () => {
    expect(() => startOrder({ services: [svc('a', [on('b')]), svc('b', [on('c')]), svc('c', [on('a')])] })).toThrow(
      'docker-compose.yaml: depends_on: a cycle: a -> b -> c -> a',
    );
    expect(() => startOrder({ services: [svc('a', [on('a')])] })).toThrow('a cycle: a -> a');
  });
});

describe('beforeMain', () => {
  it('waits for every healthcheck (up --wait) and main’s own conditions', () => {
    const services = [svc('db', [], true), svc('api'), svc('seed')];
    expect(beforeMain({ services, main: main([on('api'), on('seed', 'service_completed_successfully')]) })).toEqual([
      on('seed', 'service_completed_successfully'),
      on('db', 'service_healthy'),
      on('api'),
    ]);
  });
});
