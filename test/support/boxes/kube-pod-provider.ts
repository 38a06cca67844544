import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { toolReason } from '../../../src/core/process/failure.js';
import { containerName } from '../../../src/rollout/boxes/engine-args.js';
import { openEngineBox } from '../../../src/rollout/boxes/engine-box.js';
import { runEngine } from '../../../src/rollout/boxes/engine-run.js';
import { BOX_PROVIDERS } from '../../../src/rollout/boxes/registry.js';
import type { Box, BoxNetwork, BoxProvider, BoxSpec, ExecResult, Mount, ProcessCount } from '../../../src/rollout/boxes/types.js';
import { StageError } from '../../../src/rollout/stage-error.js';

/**
 * A third engine as a test double: each box is a Kubernetes Pod (one container, `box`), started
 * by `podman kube play` from a manifest made here with the yaml package and handed over on stdin
 * (so the box's own variables never reach an argv). The pod's container is an ordinary podman
 * container named `<pod>-box`, so everything after the start (healthcheck, workspace folder, own
 * processes, exec, copies, killStrays, the harness jail) is the podman provider's openEngineBox;
 * only start and remove are the pod's. Images and networks are the podman provider's own (one
 * build per content, shared with it).
 *
 * What kube play (podman 4.3) maps, and what it does not:
 * - memory → resources.limits.memory, cpus → resources.limits.cpu (kube play sets both cgroup caps);
 * - no-new-privileges → securityContext.allowPrivilegeEscalation: false;
 * - the process cap: a Pod has no field for it (a kubelet's podPidsLimit is the node's setting),
 *   kube play sets none, and podman 4.3's `podman update` cannot set one either; so it is written
 *   into the container's own pids cgroup from the host right after the start (as polar's sandbox
 *   caps its own groups), and a start where that cannot be done fails, naming why;
 * - `--init`: kube play has none (4.3 ignores podman's init annotation); shareProcessNamespace
 *   makes the pod's infra process (catatonit) pid 1 instead, which reaps what the agent orphans;
 * - `--network none`: kube play's own flag (the pod's infra gets a namespace with only lo), with
 *   hostNetwork false; a network of boxes is `--network NAME:alias=A,alias=B`;
 * - an image without PATH (an imported rootfs): `podman run` gives a default one, kube play does
 *   not, so the manifest does.
 */

const CONTAINER = 'box';
const KEEP_ALIVE = ['sh', '-c', 'sleep infinity'];
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const podman = BOX_PROVIDERS.podman;

export const kubePodProvider: BoxProvider = {
  name: 'kube-pod',
  probe: () => podman.probe() ?? kubePlayProbe(),
  image: (source, onNotice) => podman.image(source, onNotice),
  imageWorkdir: (image) => podman.imageWorkdir(image),
  start: startPod,
  ...(podman.networks ? { networks: podman.networks } : {}),
};

function kubePlayProbe(): string | null {
  try {
    execFileSync('podman', ['kube', 'play', '--help'], { stdio: 'ignore', timeout: 15_000 });
    return null;
  } catch {
    return '`podman kube play` is missing (podman before 4.2?)';
  }
}

/** Plays the pod, caps its processes, then opens its container as the podman provider does; on any failure the pod is removed. */
async function startPod(spec: BoxSpec): Promise<Box & Partial<ProcessCount>> {
  const pod = containerName(spec.id);
  const name = `${pod}-${CONTAINER}`;
  const manifest = podManifest(pod, spec, await imageConfig(spec.image));
  const args = ['kube', 'play', '--quiet', ...playNetworkArgs(spec.network), '-'];
  const played = await withStdin('podman', args, stringify(manifest));
  try {
    if (played.code !== 0)
      throw new StageError(
        'init',
        `podman kube play could not start the pod of ${spec.image}: ${toolReason(played.stderr) || '(no message)'} (polar ran: podman ${args.join(' ')})`,
      );
    const pids = await pidsCgroup(name);
    if (spec.limits.maxProcs > 0) capProcesses(pids, spec.limits.maxProcs);
    const box = await openEngineBox('podman', spec, name);
    return { ...box, processes: async () => readProcesses(pids), remove: () => removePod(pod) };
  } catch (err) {
    await removePod(pod);
    throw err;
  }
}

interface ImageConfig {
  Env?: string[] | null;
  Cmd?: string[] | null;
  Entrypoint?: string[] | null;
}

async function imageConfig(image: string): Promise<ImageConfig> {
  const r = await runEngine('podman', ['image', 'inspect', '--format', '{{json .Config}}', image]);
  if (r.code !== 0) throw new StageError('init', `podman cannot inspect the image ${image}: ${toolReason(r.stderr) || `exit ${r.code}`}`);
  return JSON.parse(r.stdout) as ImageConfig;
}

/** The Pod: one container from the spec; the box's variables, mounts and caps as Kubernetes names them. */
export function podManifest(pod: string, spec: BoxSpec, image: ImageConfig): Record<string, unknown> {
  const env = { ...spec.env };
  if (!(image.Env ?? []).some((e) => e.startsWith('PATH=')) && env.PATH === undefined) env.PATH = DEFAULT_PATH;
  const limits: Record<string, string> = {};
  if (spec.limits.maxMemoryBytes > 0) limits.memory = String(spec.limits.maxMemoryBytes);
  if (spec.cpus !== null && spec.cpus > 0) limits.cpu = `${Math.round(spec.cpus * 1000)}m`;
  const volumes = spec.mounts.map((m, i) => ({ name: `vol-${i}`, hostPath: hostPath(m) }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod, labels: { 'polar.box': 'kube-pod' } },
    spec: {
      restartPolicy: 'Never',
      hostNetwork: false,
      shareProcessNamespace: true,
      ...(spec.hostname ? { hostname: spec.hostname } : {}),
      containers: [
        {
          name: CONTAINER,
          image: spec.image,
          ...containerArgv(spec, image),
          env: Object.entries(env).map(([name, value]) => ({ name, value })),
          securityContext: { allowPrivilegeEscalation: false },
          resources: { limits },
          volumeMounts: spec.mounts.map((m, i) => ({ name: `vol-${i}`, mountPath: m.dest, readOnly: m.readOnly })),
        },
      ],
      volumes,
    },
  };
}

/**
 * The container's argv as `podman run` would make it, spelt out: Kubernetes' `command` drops the
 * image's CMD where `args` is absent, so both are given from the image's own where the spec keeps them.
 */
function containerArgv(spec: BoxSpec, image: ImageConfig): { command: string[]; args?: string[] } {
  const entry = [...(spec.entrypoint ?? image.Entrypoint ?? [])];
  const cmd = spec.command === undefined ? KEEP_ALIVE : spec.command.length > 0 ? [...spec.command] : spec.entrypoint ? [] : [...(image.Cmd ?? [])];
  if (entry.length > 0) return { command: entry, ...(cmd.length > 0 ? { args: cmd } : {}) };
  if (cmd.length > 0) return { command: cmd };
  throw new StageError('init', `${spec.image} has neither an ENTRYPOINT nor a CMD, and the box names no command`);
}

/** A hostPath volume of the mount's kind (a socket, a file, a folder), as it is on the host. */
function hostPath(m: Mount): { path: string; type?: string } {
  try {
    const st = fs.statSync(m.source);
    const type = st.isDirectory() ? 'Directory' : st.isSocket() ? 'Socket' : st.isFile() ? 'File' : undefined;
    return { path: m.source, ...(type ? { type } : {}) };
  } catch {
    return { path: m.source };
  }
}

/** No network (only lo), podman's default (the internet), or a network of boxes with this box's aliases. */
export function playNetworkArgs(network: BoxNetwork): string[] {
  if (network.kind === 'none') return ['--network', 'none'];
  if (network.kind === 'internet') return [];
  const aliases = network.aliases.map((a) => `alias=${a}`).join(',');
  return ['--network', aliases ? `${network.network}:${aliases}` : network.network];
}

/** The host folder of the container's pids cgroup (v1's pids hierarchy, or v2's unified one), from its first process. */
async function pidsCgroup(name: string): Promise<string | null> {
  const r = await runEngine('podman', ['inspect', '--format', '{{.State.Pid}}', name]);
  const pid = Number(r.stdout.trim());
  if (r.code !== 0 || !(pid > 0)) return null;
  const lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.map((l) => l.split(':')).find((f) => f[1]?.split(',').includes('pids'));
  if (v1?.[2]) return path.join('/sys/fs/cgroup/pids', v1[2]);
  const v2 = lines.find((l) => l.startsWith('0::'));
  return v2 ? path.join('/sys/fs/cgroup', v2.slice(3)) : null;
}

function capProcesses(dir: string | null, max: number): void {
  try {
    if (!dir) throw new Error('its cgroup was not found');
    fs.writeFileSync(path.join(dir, 'pids.max'), String(max));
  } catch (err) {
    throw new StageError(
      'init',
      `the pod's process cap (${max}) cannot be set: kube play has no field for it, and polar could not write its cgroup (${(err as Error).message}); --max-procs 0 drops the cap`,
    );
  }
}

/** The container's process count and cap from its cgroup (0: no cap). */
function readProcesses(dir: string | null): { current: number; cap: number } | null {
  if (!dir) return null;
  try {
    const current = Number(fs.readFileSync(path.join(dir, 'pids.current'), 'utf8').trim());
    const max = fs.readFileSync(path.join(dir, 'pids.max'), 'utf8').trim();
    return { current, cap: max === 'max' ? 0 : Number(max) };
  } catch {
    return null;
  }
}

/** The pod, its infra and its container: nothing of the box is left (`-i`: gone already is fine). */
async function removePod(pod: string): Promise<void> {
  await runEngine('podman', ['pod', 'rm', '-f', '-i', '-t', '0', pod]);
}

/** `podman args…` with the manifest on its stdin. */
function withStdin(program: string, args: readonly string[], input: string): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout = (stdout + d.toString()).slice(-8192);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-8192);
    });
    child.stdin.on('error', () => undefined);
    child.on('error', (err) => resolve({ code: null, stdout, stderr: `${stderr}${err.message}`, timedOut: false }));
    child.on('close', (code) => resolve({ code, stdout, stderr, timedOut: false }));
    child.stdin.end(input);
  });
}
