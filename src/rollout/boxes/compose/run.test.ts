import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../sandbox/index.js';
import { engineProvider } from '../engine-cli.js';
import { harborComposeVars } from './interpolate.js';
import { loadCompose } from './parse.js';
import { type ServicesOptions, startServices } from './run.js';

// podman with the suite's offline base image (.ci/podman); asked directly, as `podman info` alone
// says nothing of the image, and debian:12-slim is a minbase: bash and perl-base, no curl, no python.
function podmanReady(): string | null {
  try {
    execFileSync('podman', ['image', 'inspect', 'debian:12-slim'], { stdio: 'ignore', timeout: 30_000 });
    return null;
  } catch {
    return 'podman with a debian:12-slim image is not here';
  }
}
const skip = podmanReady();
const provider = engineProvider('podman');
const root = mkdtempSync(path.join(tmpdir(), 'polar-compose-run-'));
const runId = `compose-test-${process.pid}`;
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What podman still holds of this test: containers and networks named after its ids. */
function leftovers(): string[] {
  const ps = execFileSync('podman', ['ps', '-a', '--format', '{{.Names}}'], { encoding: 'utf8' });
  const nets = execFileSync('podman', ['network', 'ls', '--format', '{{.Name}}'], { encoding: 'utf8' });
  return `${ps}\n${nets}`.split('\n').filter((n) => n.includes(runId));
}

// A sidecar that answers HTTP from its image's own CMD, after a start-up delay its healthcheck waits out.
const SERVER = `use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalPort => 8000, Listen => 5, ReuseAddr => 1) or die "listen: $!";
while (my $c = $s->accept) { my $l = <$c>; print $c "HTTP/1.0 200 OK\\r\\n\\r\\n$ENV{GREETING}\\n"; close $c; }
`;

function task(name: string, compose: string): string {
  const envDir = path.join(root, name, 'environment');
  mkdirSync(path.join(envDir, 'api'), { recursive: true });
  writeFileSync(path.join(envDir, 'api', 'server.pl'), SERVER);
  writeFileSync(path.join(envDir, 'api', 'Dockerfile'), 'FROM debian:12-slim\nCOPY server.pl /server.pl\nCMD ["sh", "-c", "sleep 2; exec perl /server.pl"]\n');
  writeFileSync(path.join(envDir, 'docker-compose.yaml'), compose);
  return envDir;
}

const opts = (id: string): ServicesOptions => ({
  id: `${runId}-${id}`,
  taskName: 'compose-test',
  internet: false,
  limits: DEFAULT_LIMITS,
  cpus: null,
  buildTimeoutSec: 300,
  onNotice: () => {},
});
const GET = 'exec 3<>"/dev/tcp/$1/8000" && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3';

describe.skipIf(skip !== null)(`compose services on podman${skip ? ` (${skip})` : ''}`, () => {
  it('runs a one-shot service, builds a sidecar, waits for its healthcheck, and main reaches it by name on an internal network', async () => {
    const envDir = task(
      'ok',
      `services:
  main:
    depends_on:
      api: {condition: service_healthy}
  seed:
    image: debian:12-slim
    environment: [SEEDED=yes]
    command: ["sh", "-c", "test \\"$$SEEDED\\" = yes"]
  api:
    build: ./api
    depends_on:
      seed: {condition: service_completed_successfully}
    environment: {GREETING: "hello from \${CONTEXT_NAME:-api}"}
    healthcheck:
      test: ["CMD", "bash", "-c", "exec 3<>/dev/tcp/localhost/8000"]
      interval: 1s
      timeout: 5s
      retries: 10
`,
    );
    const plan = loadCompose({ environmentDir: envDir, vars: harborComposeVars({ environmentDir: envDir }) });
    if (!plan) throw new Error('no plan');
    const up = await startServices(provider, plan, opts('ok'));
    const main = await provider.start({
      id: `${runId}-ok-main`,
      image: 'debian:12-slim',
      workdir: '/',
      network: up.mainNetwork,
      mounts: [],
      limits: DEFAULT_LIMITS,
      cpus: null,
    });
    try {
      // Healthy before startServices returned: the first request is answered.
      const got = await main.shell(GET, {}, 20_000, undefined, ['api']);
      expect(got.stdout).toContain('hello from api');
      const back = await up.boxes.get('api')?.sh('getent hosts main', [], 20_000);
      expect(back?.code).toBe(0);
      const out = await main.shell('timeout 5 bash -c "exec 3<>/dev/tcp/1.1.1.1/80"', {}, 20_000);
      expect(out.code).not.toBe(0);
    } finally {
      await main.remove();
      await up.remove();
    }
    expect(leftovers()).toEqual([]);
  }, 300_000);

  it('leaves nothing behind when a healthcheck never passes', async () => {
    const envDir = task(
      'bad',
      `services:
  api:
    build: ./api
    healthcheck: {test: "exit 3", interval: 1s, timeout: 2s, retries: 2}
  web:
    image: debian:12-slim
    command: ["sleep", "infinity"]
    depends_on: {api: {condition: service_healthy}}
`,
    );
    const plan = loadCompose({ environmentDir: envDir, vars: harborComposeVars({ environmentDir: envDir }) });
    if (!plan) throw new Error('no plan');
    await expect(startServices(provider, plan, opts('bad'))).rejects.toThrow(
      "compose service api: the task's healthcheck failed after 2 consecutive tries (exit 3): exit 3",
    );
    expect(leftovers()).toEqual([]);
  }, 300_000);
});
