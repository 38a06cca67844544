import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../sandbox/index.js';
import type { Box, BoxProvider, BoxSpec, ExecResult } from '../types.js';
import type { ComposePlan, ComposeService } from './plan.js';
import { type ServicesOptions, startServices } from './run.js';

/** A provider that only records: what startServices asks of it, in order. Real boxes: run.test.ts. */
function fakeProvider(health: Record<string, number[]>, opts: { networks?: boolean; failBuild?: string } = {}) {
  const events: string[] = [];
  const specs: BoxSpec[] = [];
  const box = (spec: BoxSpec): Box => {
    const name = spec.id.replace('s1-', '');
    const answer = (code: number): ExecResult => ({ code, stdout: '', stderr: code ? 'down' : '', timedOut: false });
    return {
      name,
      workdir: spec.workdir,
      async sh(script, args) {
        if (script.startsWith('cd --')) {
          events.push(`run:${name}:${(args ?? []).slice(1).join(' ')}`);
          return answer(0);
        }
        const code = health[name]?.shift() ?? 1;
        events.push(`health:${name}:${code}`);
        return answer(code);
      },
      shell: async () => answer(0),
      killStrays: async () => 0,
      copyIn: async () => {},
      copyOut: async () => {},
      copyPathOut: async () => false,
      copyPathIn: async () => {},
      async remove() {
        events.push(`remove:${name}`);
      },
    };
  };
  const provider: BoxProvider = {
    name: 'fake',
    probe: () => null,
    async image(source) {
      if (source.kind === 'build' && source.name === opts.failBuild) throw new Error('no such base image');
      return source.kind === 'ref' ? source.ref : `built-${source.name}`;
    },
    imageWorkdir: async () => '/srv',
    async start(spec) {
      events.push(`start:${spec.id.replace('s1-', '')}`);
      specs.push(spec);
      return box(spec);
    },
    ...(opts.networks === false
      ? {}
      : {
          networks: {
            async create(id: string, internal: boolean) {
              events.push(`network:${id}:${internal ? 'internal' : 'open'}`);
              return `net-${id}`;
            },
            async remove(name: string) {
              events.push(`network-rm:${name}`);
            },
          },
        }),
  };
  return { provider, events, specs };
}

const hc = { command: 'check', intervalSec: 0.01, timeoutSec: 1, startPeriodSec: 0, startIntervalSec: 0.01, retries: 2 };
const svc = (name: string, s: Partial<ComposeService> = {}): ComposeService => ({
  name,
  image: { kind: 'ref', ref: 'img' },
  env: {},
  healthcheck: null,
  dependsOn: [],
  aliases: [],
  ...s,
});
const plan = (services: ComposeService[], main: Partial<ComposePlan['main']> = {}): ComposePlan => ({
  services,
  main: { dependsOn: [], env: {}, healthcheck: null, aliases: [], ...main },
  network: { name: 'default', internal: false },
  notices: [],
});
const opts: ServicesOptions = { id: 's1', taskName: 'demo', internet: false, limits: DEFAULT_LIMITS, cpus: null, buildTimeoutSec: 60, onNotice: () => {} };

describe('startServices, with a recording provider', () => {
  it('starts a dependent once its dependency is healthy, and returns once every healthcheck passed', async () => {
    const { provider, events, specs } = fakeProvider({ db: [1, 1, 0], api: [0] });
    const p = plan(
      [
        svc('api', {
          image: { kind: 'build', context: '/ctx/api' },
          healthcheck: hc,
          dependsOn: [{ service: 'db', condition: 'service_healthy' }],
          command: ['serve'],
        }),
        svc('db', { healthcheck: { ...hc, retries: 1, startPeriodSec: 5 } }),
      ],
      { dependsOn: [{ service: 'api', condition: 'service_started' }], aliases: ['agent'] },
    );
    const up = await startServices(provider, p, opts);
    expect(events).toEqual(['network:s1:internal', 'start:db', 'health:db:1', 'health:db:1', 'health:db:0', 'start:api', 'health:api:0']);
    expect(up.network).toBe('net-s1');
    expect([...up.boxes.keys()].sort()).toEqual(['api', 'db']);
    expect(up.mainNetwork).toEqual({ kind: 'attach', network: 'net-s1', aliases: ['main', 'agent'] });
    const api = specs.find((s) => s.id === 's1-api');
    expect(api).toMatchObject({
      image: 'built-demo-api',
      workdir: '/srv',
      command: ['serve'],
      network: { kind: 'attach', network: 'net-s1', aliases: ['api'] },
    });
    // No `command`: the image's own CMD ([] after the image), not polar's keep-alive.
    expect(specs.find((s) => s.id === 's1-db')?.command).toEqual([]);
    await up.remove();
    expect(events.slice(-3)).toEqual(['remove:db', 'remove:api', 'network-rm:net-s1']);
  });

  it('runs a one-shot service’s command to its end before its dependents start', async () => {
    const { provider, events, specs } = fakeProvider({});
    const p = plan([
      svc('migrate', { command: ['migrate', 'up'], entrypoint: ['/init'] }),
      svc('api', { dependsOn: [{ service: 'migrate', condition: 'service_completed_successfully' }] }),
    ]);
    await startServices(provider, p, { ...opts, internet: true });
    expect(events).toEqual(['network:s1:open', 'start:migrate', 'run:migrate:/init migrate up', 'start:api']);
    const migrate = specs.find((s) => s.id === 's1-migrate');
    expect(migrate?.entrypoint).toEqual([]);
    expect(migrate?.command).toBeUndefined();
  });

  it('removes every box and the network when a healthcheck fails, and starts nothing after it', async () => {
    const { provider, events } = fakeProvider({ db: [1, 1, 1] });
    const p = plan([svc('cache'), svc('db', { healthcheck: hc }), svc('api', { dependsOn: [{ service: 'db', condition: 'service_healthy' }] })]);
    await expect(startServices(provider, p, opts)).rejects.toThrow(
      "compose service db: the task's healthcheck failed after 2 consecutive tries (exit 1: down): check",
    );
    expect(events).not.toContain('start:api');
    expect(events.filter((e) => e.startsWith('remove:')).sort()).toEqual(['remove:cache', 'remove:db']);
    expect(events.at(-1)).toBe('network-rm:net-s1');
  });

  it('refuses a provider without networks, and a failed build, before making anything', async () => {
    const bare = fakeProvider({}, { networks: false });
    await expect(startServices(bare.provider, plan([svc('db')]), opts)).rejects.toThrow('the fake provider cannot make one (no BoxNetworks)');
    const wd = await startServices(fakeProvider({}).provider, plan([svc('db', { workingDir: '/data' })]), opts).catch((e: Error) => e.message);
    expect(wd).toBe(
      'docker-compose.yaml: service db: `working_dir` is not supported by polar yet on a long-running service (only on a one-shot service, which another waits for with service_completed_successfully)',
    );
    const broken = fakeProvider({}, { failBuild: 'demo-api' });
    await expect(startServices(broken.provider, plan([svc('api', { image: { kind: 'build', context: '/ctx' } })]), opts)).rejects.toThrow(
      'compose service api: its image: no such base image',
    );
    expect([...bare.events, ...broken.events]).toEqual([]);
  });
});
