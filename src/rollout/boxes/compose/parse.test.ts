import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { harborComposeVars } from './interpolate.js';
import { loadCompose, parseCompose } from './parse.js';

const root = mkdtempSync(path.join(tmpdir(), 'polar-compose-parse-'));
const envDir = path.join(root, 'task', 'environment');
for (const sub of ['inventory', 'tools-server', 'migrate']) {
  mkdirSync(path.join(envDir, sub), { recursive: true });
  writeFileSync(path.join(envDir, sub, 'Dockerfile'), 'FROM debian:12-slim\n');
}
writeFileSync(path.join(envDir, 'Dockerfile'), 'FROM debian:12-slim\n');
mkdirSync(path.join(root, 'outside'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const vars = harborComposeVars({ environmentDir: envDir, mainImage: 'polar-task', cpus: 2, memoryMb: 2048 });
const parse = (yaml: string, extra: Record<string, string> = {}) => parseCompose(yaml, { environmentDir: envDir, vars: { ...vars, ...extra } });
const refusal = (yaml: string) => {
  try {
    parse(yaml);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('not refused');
};

describe('compose files in the shapes of Harbor’s examples', () => {
  it('a sidecar built from its own folder, healthy before main (sidecar-artifacts’ shape)', () => {
    const plan = parse(`
services:
  main:
    depends_on:
      inventory:
        condition: service_healthy
  inventory:
    build:
      context: ./inventory
    expose: ["9000"]
    healthcheck:
      test: ["CMD", "curl", "-sf", "http://localhost:9000/count"]
      interval: 2s
      timeout: 5s
      retries: 15
      start_period: 3s
`);
    expect(plan.main.dependsOn).toEqual([{ service: 'inventory', condition: 'service_healthy' }]);
    expect(plan.services).toHaveLength(1);
    const s = plan.services[0];
    expect(s?.image).toEqual({ kind: 'build', context: realpathSync(path.join(envDir, 'inventory')) });
    expect(s?.healthcheck).toEqual({
      command: "exec 'curl' '-sf' 'http://localhost:9000/count'",
      intervalSec: 2,
      timeoutSec: 5,
      retries: 15,
      startPeriodSec: 3,
      startIntervalSec: 5,
    });
    expect(plan.network).toEqual({ name: 'default', internal: false });
    expect(plan.notices).toEqual([]);
  });

  it('a tool server whose CMD healthcheck holds quotes, semicolons and `$$` (hello-mcp’s shape)', () => {
    const plan = parse(`
services:
  main:
    depends_on:
      tools-server: {condition: service_healthy}
  tools-server:
    build: {context: tools-server}
    healthcheck:
      test: ["CMD", "printf", "%s|", "it's", "a; b", "$$HOME", "import socket; socket.create_connection(('localhost', 8000))"]
      interval: 1m30s
      timeout: 500ms
`);
    const hc = plan.services[0]?.healthcheck;
    // The words reach the program as they were written, through sh.
    expect(execFileSync('sh', ['-c', hc?.command ?? ''], { encoding: 'utf8' })).toBe(
      "it's|a; b|$HOME|import socket; socket.create_connection(('localhost', 8000))|",
    );
    expect([hc?.intervalSec, hc?.timeoutSec, hc?.retries, hc?.startPeriodSec]).toEqual([90, 0.5, 3, 0]);
  });

  it('a Terminal-Bench-mapped main restating Harbor’s base is accepted; a variable Harbor does not define is empty, as compose makes an unset one', () => {
    const tb = `
services:
  main:
    build:
      context: \${CONTEXT_DIR}
    image: \${MAIN_IMAGE_NAME}
    command: ["sh", "-c", "sleep infinity"]
    environment: ["TEST_DIR=\${TEST_DIR}"]
    deploy:
      resources:
        limits:
          cpus: \${CPUS}
          memory: \${MEMORY}
  db:
    image: postgres:16
`;
    const unset = parseCompose(tb, { environmentDir: envDir, vars: harborComposeVars({ environmentDir: envDir, mainImage: 'x', cpus: 1, memoryMb: 512 }) });
    expect(unset.main.env).toEqual({ TEST_DIR: '' });
    const plan = parseCompose(tb, {
      environmentDir: envDir,
      vars: harborComposeVars({ environmentDir: envDir, mainImage: 'x', cpus: 1, memoryMb: 512, taskEnv: { TEST_DIR: '/tests' } }),
    });
    expect(plan.main.env).toEqual({ TEST_DIR: '/tests' });
    expect(plan.main.command).toBeUndefined();
    expect(plan.services[0]?.image).toEqual({ kind: 'ref', ref: 'postgres:16' });
    expect(plan.notices).toEqual([]);
  });
});

describe('service fields', () => {
  it('environment in list and map form; a bare name takes compose’s variable or is left out', () => {
    const plan = parse(`
services:
  a: {image: x, environment: ["A=1", "B=x=y", "CPUS", "NOPE"]}
  b: {image: x, environment: {PORT: 8000, DEBUG: true, EMPTY: "", CPUS: null, NOPE: null, URL: "http://\${HOST:-db}:5432"}}
`);
    expect(plan.services[0]?.env).toEqual({ A: '1', B: 'x=y', CPUS: '2' });
    expect(plan.services[1]?.env).toEqual({ PORT: '8000', DEBUG: 'true', EMPTY: '', CPUS: '2', URL: 'http://db:5432' });
  });

  it('command and entrypoint as lists or strings split as compose splits them', () => {
    const plan = parse(`
services:
  a: {image: x, command: "serve --name 'my app' \\"two words\\" a\\\\ b", entrypoint: ["/bin/run", "-x"]}
  b: {image: x, entrypoint: [], command: ["sh", "-c", "echo $$HOME && sleep 1"]}
`);
    expect(plan.services[0]?.command).toEqual(['serve', '--name', 'my app', 'two words', 'a b']);
    expect(plan.services[0]?.entrypoint).toEqual(['/bin/run', '-x']);
    expect(plan.services[1]?.entrypoint).toEqual([]);
    expect(plan.services[1]?.command).toEqual(['sh', '-c', 'echo $HOME && sleep 1']);
    expect(refusal('services: {a: {image: x, command: "a && b"}}')).toMatch(
      /service a: command: `&` in a string command is a shell operator.*\["sh", "-c", "a && b"\]/,
    );
  });

  it('healthcheck forms: string and CMD-SHELL run by sh, NONE and disable turn it off', () => {
    const plan = parse(`
services:
  a: {image: x, healthcheck: {test: "pg_isready -U app", start_interval: 1s}}
  b: {image: x, healthcheck: {test: ["CMD-SHELL", "test -f /ready"]}}
  c: {image: x, healthcheck: {test: ["NONE"]}}
  d: {image: x, healthcheck: {disable: true}}
`);
    expect(plan.services.map((s) => s.healthcheck?.command ?? null)).toEqual(['pg_isready -U app', 'test -f /ready', null, null]);
    expect(plan.services[0]?.healthcheck).toMatchObject({ intervalSec: 30, timeoutSec: 30, startIntervalSec: 1, retries: 3 });
  });

  it('depends_on in list form and every map condition', () => {
    const plan = parse(`
services:
  migrate: {build: ./migrate, command: ["true"]}
  db: {image: x, healthcheck: {test: "true"}}
  api:
    image: x
    depends_on:
      db: {condition: service_healthy, restart: true}
      migrate: {condition: service_completed_successfully}
  main: {depends_on: [api]}
`);
    expect(plan.services.find((s) => s.name === 'api')?.dependsOn).toEqual([
      { service: 'db', condition: 'service_healthy' },
      { service: 'migrate', condition: 'service_completed_successfully' },
    ]);
    expect(plan.main.dependsOn).toEqual([{ service: 'api', condition: 'service_started' }]);
  });

  it('one named network with aliases and internal: true', () => {
    const plan = parse(`
services:
  main: {networks: [back]}
  api: {image: x, networks: {back: {aliases: [api.internal]}}}
networks:
  back: {internal: true, driver: bridge}
`);
    expect(plan.network).toEqual({ name: 'back', internal: true });
    expect(plan.services[0]?.aliases).toEqual(['api.internal']);
  });

  it('ports are not published, with a notice; expose says nothing', () => {
    const plan = parse('services: {api: {image: x, ports: ["8080:80"], expose: [80], restart: "no"}}');
    expect(plan.notices).toEqual(['docker-compose.yaml: service api: its `ports` are not published on the host: main reaches it by name on their network']);
  });

  it('no file: no plan', () => {
    expect(loadCompose({ environmentDir: path.join(root, 'outside'), vars })).toBeNull();
  });
});

describe('what polar cannot run is refused by name', () => {
  it.each([
    ['services: {api: {image: x, volumes: ["./data:/data"]}}', 'service api: `volumes` is not supported by polar yet'],
    ['services: {api: {image: x, user: "1000"}}', 'service api: `user` is not supported by polar yet'],
    ['services: {api: {image: x, network_mode: host}}', 'service api: `network_mode` is not supported by polar yet'],
    ['services: {api: {image: x}}\nvolumes: {data: {}}', 'top level: `volumes` is not supported by polar yet'],
    ['services: {api: {build: {context: ../../outside}}}', 'service api: build.context: ../../outside is outside'],
    ['services: {api: {build: {context: ./inventory, args: {A: "1"}}}}', 'service api: build: `args` is not supported by polar yet'],
    ['services: {api: {build: "https://github.com/x/y.git"}}', 'a remote context'],
    ['services: {api: {image: "${TAG:?set a tag}"}}', 'service api: image: ${TAG} is required: set a tag'],
    ['services: {api: {image: x, healthcheck: {interval: 2s}}}', 'service api: healthcheck.test: no `test`'],
    ['services: {api: {image: x, healthcheck: {test: "true", interval: 2}}}', 'healthcheck.interval: expected a duration string'],
    ['services: {api: {image: x, healthcheck: {test: "true", interval: 2 s}}}', '"2 s" is not a duration'],
    [
      'services: {api: {image: x}, main: {depends_on: {api: {condition: service_healthy}}}}',
      'service main: depends_on: api must be healthy, and it has no healthcheck here',
    ],
    ['services: {api: {image: x}, main: {depends_on: {api: {condition: service_completed_successfully}}}}', 'api must complete, and it has no `command`'],
    ['services: {api: {image: x, depends_on: [main]}}', 'service api: depends_on: main: polar starts the agent’s box after every other service'],
    ['services: {api: {image: x, depends_on: [db]}}', 'service api: depends_on: db, which the file does not define'],
    [
      'services: {api: {image: x, networks: [a]}, db: {image: x, networks: [b]}}\nnetworks: {a: {}, b: {}}',
      'networks: polar joins all services and main on one network, and these are on several (main: default; api: a; db: b)',
    ],
    [
      'services: {api: {image: x, networks: [a]}, main: {networks: [a]}}\nnetworks: {a: {external: true}}',
      'networks.a: `external` is not supported by polar yet',
    ],
    ['services: {main: {build: {context: ./inventory}}}', 'service main: build: polar builds main from environment/Dockerfile'],
    ['services: {api: {image: x}\n  bad', 'docker-compose.yaml: YAML:'],
    ['services: {api: {command: ["true"]}}', 'service api: neither `build` nor `image`'],
  ])('%s', (yaml, message) => {
    expect(refusal(yaml)).toContain(message);
  });

  it('every message starts with the file’s name', () => {
    expect(refusal('services: {api: {image: x, volumes: []}}')).toBe('docker-compose.yaml: service api: `volumes` is not supported by polar yet');
  });
});
