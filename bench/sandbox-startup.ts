/**
 * The sandbox's added start-up per sample (issue 24): how long from "start this command" to the
 * first byte of its output, for a trivial command (`/bin/echo`), with
 *
 *   - none: spawned as it is;
 *   - old:  the first sandbox (`--ro-bind / /`, a private /tmp, a pid namespace; its argv as
 *           src/harness/sandbox.ts built it before issue 24, reconstructed below);
 *   - new, in its three network modes: the minimal file-system view from an empty root, user, pid,
 *     ipc, uts namespaces, the per-sample cgroup entered before bwrap starts, and
 *       - proxy-only (the harness's default): its own network namespace and the bridge, a forwarder
 *         inside that listens on the proxy's port; Perl where the host has it (src/sandbox/
 *         bridge-perl.ts: it listens, then becomes the command while a forked copy forwards);
 *       - proxy-only, node bridge: the same with the Node forwarder (the only one before issue 33,
 *         still the fallback): a Node process that listens and starts the command once it does;
 *       - none (evaluators): its own, empty network namespace, no bridge;
 *       - host (opt-in): the host's network, no bridge.
 *
 * The new sandbox's time runs from openJail (its private folders, the cgroup, the argv) to the
 * first byte, as a rollout pays it per sample; its teardown (the command's exit, jail.close():
 * killing what is left, removing the group and folders) is reported on its own, as is the old
 * sandbox's exit. Paths take turns round by round, each round in the next permutation of their
 * order (bench/paths.ts turnOrder), so a slow neighbour is shared out evenly.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_LIMITS, findBwrap, openJail, privateSocketPath, type NetworkMode, type SandboxSettings } from '../src/sandbox/index.js';
import { turnOrder } from './paths.js';

export const STARTUP_PATHS = ['none', 'old', 'new proxy-only', 'new proxy-only, node bridge', 'new none', 'new host'] as const;
export type StartupPath = (typeof STARTUP_PATHS)[number];

export interface StartupSample {
  path: StartupPath;
  /** ms from the start (openJail for the new sandbox, spawn otherwise) to the first output byte. */
  firstByte: number;
  /** ms from the first byte to the command's exit and, for the new sandbox, jail.close(). */
  teardown: number;
  /** ms spent before the spawn (openJail: folders, cgroup, argv); 0 for the others. */
  open: number;
}

/** The pre-issue-24 sandbox's argv (git show 94ef183:src/harness/sandbox.ts), for the same command. */
function oldSandboxArgs(cwd: string, file: string, args: string[]): string[] {
  return [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/var/tmp',
    '--bind',
    cwd,
    cwd,
    '--unshare-pid',
    '--die-with-parent',
    '--chdir',
    cwd,
    '--',
    file,
    ...args,
  ];
}

/** Spawns and resolves at the first stdout byte, then at the exit. */
function timed(file: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, t0: number): Promise<{ firstByte: number; exited: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let firstByte = -1;
    let stderr = '';
    child.stdout.on('data', () => {
      if (firstByte < 0) firstByte = performance.now() - t0;
    });
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code !== 0 || firstByte < 0) reject(new Error(`${file} exited ${code} (first byte ${firstByte}): ${stderr.slice(0, 500)}`));
      else resolve({ firstByte, exited: performance.now() - t0 });
    });
  });
}

export async function measureStartup(rounds: number, warmup = 3): Promise<StartupSample[]> {
  const bwrap = findBwrap();
  if (!bwrap) throw new Error('the sandbox start-up benchmark needs bubblewrap (apt-get install bubblewrap)');
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-sbx-'));
  // A listening Unix socket stands in for the proxy's: the bridge needs one to point at, though a
  // command that makes no call never connects to it.
  const socket = await privateSocketPath();
  const server = net.createServer((c) => c.destroy());
  await new Promise<void>((resolve) => server.listen(socket.path, resolve));
  // The default limits, as a rollout without limit flags runs; the spec's network picks the mode.
  const settings: SandboxSettings = { kind: 'bwrap', bwrap, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const samples: StartupSample[] = [];
  try {
    for (let round = 0; round < warmup + rounds; round++) {
      for (const p of turnOrder(STARTUP_PATHS, round)) {
        let sample: StartupSample;
        if (p === 'none' || p === 'old') {
          const t0 = performance.now();
          const r = p === 'none' ? await timed('/bin/echo', ['x'], env, cwd, t0) : await timed(bwrap, oldSandboxArgs(cwd, '/bin/echo', ['x']), env, cwd, t0);
          sample = { path: p, firstByte: r.firstByte, teardown: r.exited - r.firstByte, open: 0 };
        } else {
          const nodeBridge = p === 'new proxy-only, node bridge';
          const network = (nodeBridge ? 'proxy-only' : p.slice('new '.length)) as NetworkMode;
          const t0 = performance.now();
          const jail = await openJail(nodeBridge ? { ...settings, forwarder: 'node' } : settings, {
            cwd,
            network,
            ...(network === 'proxy-only' ? { proxy: { port: 40000 + (round % 1000), socket: socket.path } } : {}),
          });
          const cmd = jail.wrap({ file: '/bin/echo', args: ['x'], env });
          const open = performance.now() - t0;
          const r = await timed(cmd.file, cmd.args, cmd.env, cwd, t0);
          const reason = await jail.close({ exitCode: 0, signal: null });
          if (reason) throw new Error(`the sandbox reported a limit for /bin/echo: ${reason}`);
          sample = { path: p, firstByte: r.firstByte, teardown: performance.now() - t0 - r.firstByte, open };
        }
        if (round >= warmup) samples.push(sample);
      }
    }
  } finally {
    server.close();
    await socket.remove();
    fs.rmSync(cwd, { recursive: true, force: true });
  }
  return samples;
}

export function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The results table: per path p50/p90 of first byte, added over `none` at each, openJail's share, and the teardown. */
export function startupTable(samples: StartupSample[]): string {
  const of = (p: StartupPath) => samples.filter((s) => s.path === p);
  const base = of('none').map((s) => s.firstByte);
  const rows = STARTUP_PATHS.map((p) => {
    const fb = of(p).map((s) => s.firstByte);
    const td = of(p).map((s) => s.teardown);
    const added = (q: number) => (p === 'none' ? '–' : (percentile(fb, q) - percentile(base, q)).toFixed(1));
    const open = p.startsWith('new')
      ? percentile(
          of(p).map((s) => s.open),
          0.5,
        ).toFixed(1)
      : '–';
    return `| ${p} | ${fb.length} | ${percentile(fb, 0.5).toFixed(1)} | ${percentile(fb, 0.9).toFixed(1)} | ${added(0.5)} | ${added(0.9)} | ${open} | ${percentile(td, 0.5).toFixed(1)} | ${percentile(td, 0.9).toFixed(1)} |`;
  });
  return [
    '| sandbox | n | first byte p50 ms | first byte p90 ms | added p50 ms | added p90 ms | of which openJail p50 ms | teardown p50 ms | teardown p90 ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

/** What the run shows against the target, in numbers from the same samples as the table. */
export function startupVerdict(samples: StartupSample[], targetMs = 30): string {
  const p50 = (p: StartupPath) =>
    percentile(
      samples.filter((s) => s.path === p).map((s) => s.firstByte),
      0.5,
    );
  const base = p50('none');
  const added = (p: StartupPath) => p50(p) - base;
  const harness = added('new proxy-only');
  const bridge = p50('new proxy-only') - p50('new none');
  const nodeBridge = p50('new proxy-only, node bridge') - p50('new none');
  return [
    `In this run a harness's sandbox (new, proxy-only) added ${harness.toFixed(0)} ms at the median against the target of <= ${targetMs} ms: ${harness <= targetMs ? 'met' : 'not met'}; with the Node bridge it added ${added('new proxy-only, node bridge').toFixed(0)} ms.`,
    `Of that, the bridge is ~${bridge.toFixed(0)} ms (proxy-only minus none), against ~${nodeBridge.toFixed(0)} ms for the Node bridge's start-up; the sandbox itself (openJail, bwrap with the minimal view and its namespaces) adds ${added('new none').toFixed(0)} ms, against ${added('old').toFixed(0)} ms for the old one.`,
    `Evaluators (new, none) and host-network samples (new, host) pay no bridge.`,
  ].join(' ');
}
