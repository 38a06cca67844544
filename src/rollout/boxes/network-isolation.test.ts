import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../harness/env.js';
import { DEFAULT_LIMITS, findBwrap, type SandboxSettings } from '../../sandbox/index.js';
import { boxEnvironment } from '../environments/box/index.js';
import type { SampleEnvironment } from '../environments/types.js';
import { loadTasks } from '../load-tasks.js';
import { rolloutInsidePaths } from '../sandboxing.js';
import { containerName } from './engine-args.js';
import { engineProvider } from './engine-cli.js';
import type { Box, BoxNetwork } from './types.js';

/**
 * Siblings cannot reach each other through the networks polar makes (the agent is an adversary:
 * one sample's agent, given the internet, must not reach another sample's box or sidecars by
 * address). podman joins every bridge network to the host's routing, so two networks with the
 * internet reached each other (seen here); polar makes its networks with podman's `isolate` option.
 * The attack: a box on one sample's network opens a TCP connection to a listener on another's, by IP.
 */
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
const runId = `iso-test-${process.pid}`;
const made: { boxes: Box[]; networks: string[] } = { boxes: [], networks: [] };
afterAll(async () => {
  for (const b of made.boxes) await b.remove();
  for (const n of made.networks) await provider.networks?.remove(n);
});

const LISTEN = `perl -MIO::Socket::INET -e '$s=IO::Socket::INET->new(LocalPort=>8000,Listen=>5,ReuseAddr=>1) or die; while($c=$s->accept){print $c "secret\\n"; close $c}'`;

async function box(id: string, network: BoxNetwork, command?: string[]): Promise<Box> {
  const b = await provider.start({
    id: `${runId}-${id}`,
    image: 'debian:12-slim',
    workdir: '/app',
    network,
    mounts: [],
    limits: DEFAULT_LIMITS,
    cpus: null,
    ...(command ? { command } : {}),
  });
  made.boxes.push(b);
  return b;
}

function ipOf(b: Box): string {
  return execFileSync('podman', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', b.name], { encoding: 'utf8' }).trim();
}

/** Whether `from` reaches port 8000 at `ip` (3 s a try; a listener just started may need a few). */
async function reaches(from: Box, ip: string, tries = 1): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    const r = await from.shell('timeout 3 bash -c \'exec 3<>"/dev/tcp/$1/8000" && cat <&3\' bash "$1"', {}, 20_000, undefined, [ip]);
    if (r.code === 0 && r.stdout.includes('secret')) return true;
    await new Promise((done) => setTimeout(done, 1000));
  }
  return false;
}

describe.skipIf(skip !== null)(`networks between samples${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('a box on one sample network reaches a listener on its own, and none on another sample network, with or without the internet', async () => {
    const networks = provider.networks!;
    for (const internal of [false, true]) {
      const tag = internal ? 'in' : 'out';
      const a = await networks.create(`${runId}-a-${tag}`, internal);
      const b = await networks.create(`${runId}-b-${tag}`, internal);
      made.networks.push(a, b);
      const target = await box(`target-${tag}`, { kind: 'attach', network: b, aliases: ['api'] }, ['sh', '-c', LISTEN]);
      const sibling = await box(`sibling-${tag}`, { kind: 'attach', network: b, aliases: [] });
      const attacker = await box(`attacker-${tag}`, { kind: 'attach', network: a, aliases: [] });
      const ip = ipOf(target);
      expect(ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      // The check can succeed: a box on the same network reaches it.
      expect(await reaches(sibling, ip, 10)).toBe(true);
      expect(await reaches(attacker, ip, 2), `a box on another sample's ${internal ? 'internal' : 'internet'} network reached ${ip}`).toBe(false);
    }
  }, 180_000);
});

/** Two samples of a task that allows the internet, each in its podman box: can A's agent reach B's? */
describe.skipIf(skip !== null || findBwrap() === null)(`an agent with the internet and its sibling${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it("cannot reach a sibling sample's box by its address (each sample's internet is a network of its own)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-iso-env-'));
    const t = path.join(dir, 'suite', 'online');
    fs.mkdirSync(path.join(t, 'environment'), { recursive: true });
    fs.mkdirSync(path.join(t, 'tests'));
    fs.writeFileSync(
      path.join(t, 'task.toml'),
      'version = "1.0"\n[environment]\nallow_internet = true\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n',
    );
    fs.writeFileSync(path.join(t, 'instruction.md'), 'x\n');
    fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\n');
    fs.writeFileSync(path.join(t, 'tests', 'test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
    const task = loadTasks(path.join(dir, 'suite'))[0]!;
    const sandbox: SandboxSettings = { kind: 'bwrap', bwrap: findBwrap()!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };
    const deps = {
      sandbox,
      inside: rolloutInsidePaths(sandbox, { tasksDir: null }),
      tasksDir: null,
      proxySocket: null,
      stateDir: dir,
      modelHarness: false,
      harnessBin: null,
      nodeBin: null,
      scratch: path.join(dir, 'scratch'),
      onNotice: () => undefined,
    };
    const open = (n: string): SampleEnvironment =>
      boxEnvironment(provider)(deps, { task, sampleId: `${runId}-env-${n}`, sessionId: `ses_${n}`, dir: path.join(dir, 'ws', n) });
    const [a, b] = [open('a'), open('b')];
    const agent = (env: SampleEnvironment, command: string) =>
      env.runAgentCommand(command, { env: baseEnvironment(), timeoutMs: 60_000, readOnly: [], network: 'host' });
    try {
      await a.prepare(Date.now() + 120_000);
      await b.prepare(Date.now() + 120_000);
      // B's agent leaves a listener running in its box.
      await agent(b, `(setsid ${LISTEN} > /dev/null 2>&1 &); sleep 1; true`);
      const ip = execFileSync('podman', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', containerName(`${runId}-env-b`)], {
        encoding: 'utf8',
      }).trim();
      expect(ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      const probe = `timeout 3 bash -c 'exec 3<>"/dev/tcp/${ip}/8000" && cat <&3' > /app/got.txt 2>&1; true`;
      // The check can succeed: B reaches its own listener at that address.
      await agent(b, probe);
      await agent(a, probe);
      await b.collect();
      await a.collect();
      expect(fs.readFileSync(path.join(dir, 'ws', 'b', 'got.txt'), 'utf8')).toContain('secret');
      expect(fs.readFileSync(path.join(dir, 'ws', 'a', 'got.txt'), 'utf8')).not.toContain('secret');
    } finally {
      await a.dispose(false);
      await b.dispose(false);
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // Each sample's network went with it.
    const left = execFileSync('podman', ['network', 'ls', '--format', '{{.Name}}'], { encoding: 'utf8' });
    expect(left.split('\n').filter((n) => n.includes(`${runId}-env`))).toEqual([]);
  }, 300_000);
});
