import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Hosts } from '../netns.js';

/**
 * One simulated host's worker: `ip netns exec` into the host's network namespace, then its own
 * hostname (UTS) and mount namespace, where each folder in `hide` is covered by an empty tmpfs: the
 * coordinator's folder (tasks, repositories, Harbor folders, its state) and the other hosts' folders
 * are not there, so nothing but PostgreSQL can bring a task's content to this host.
 */
export interface HostWorker {
  index: number;
  name: string;
  address: string;
  dir: string;
  child: ChildProcess;
  /** stdout and stderr, as they came. */
  log: string;
  /** Its `--json` lines (one per sample it ended). */
  ended: Record<string, unknown>[];
  ready: boolean;
  /** SIGKILLed by the check (the host's power cut), not by a fault of its own. */
  killed: boolean;
  /** Whether it was running when the rollout ended (set then). */
  aliveAtEnd: boolean;
}

const SHELL = 'hostname "$0" || exit 97; for p in $FLEET_HIDE; do mount -t tmpfs -o size=1m,mode=0755 fleet-hidden "$p" || exit 98; done; exec "$@"';

export function spawnHostWorker(hosts: Hosts, index: number, dir: string, hide: string[], argv: string[], env: NodeJS.ProcessEnv): HostWorker {
  const host = hosts.hosts[index]!;
  for (const sub of ['home', 'state', 'tmp', 'out']) fs.mkdirSync(path.join(dir, sub), { recursive: true });
  const child = spawn('ip', ['netns', 'exec', host.name, 'unshare', '--uts', '--mount', '--propagation', 'private', 'sh', '-c', SHELL, host.name, ...argv], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...env,
      FLEET_HIDE: hide.join(' '),
      HOME: path.join(dir, 'home'),
      POLAR_STATE_DIR: path.join(dir, 'state'),
      TMPDIR: path.join(dir, 'tmp'),
      NO_COLOR: '1',
    },
  });
  const w: HostWorker = { index, name: host.name, address: host.address, dir, child, log: '', ended: [], ready: false, killed: false, aliveAtEnd: false };
  const logFile = fs.createWriteStream(path.join(dir, 'worker.log'), { flags: 'a' });
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    const text = d.toString();
    w.log += text;
    logFile.write(text);
    partial += text;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        const json = JSON.parse(line) as Record<string, unknown>;
        if (json.type === 'done') w.ended.push(json);
      } catch {
        /* not a JSON line */
      }
    }
  });
  child.stderr!.on('data', (d: Buffer) => {
    const text = d.toString();
    w.log += text;
    logFile.write(text);
    if (/ready for \S+ samples/.test(w.log)) w.ready = true;
  });
  child.once('exit', () => logFile.end());
  return w;
}

/** Every descendant of `pid` (from /proc), itself included. */
function tree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent is the 4th field, after the command name in parentheses (which may hold spaces).
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      /* gone meanwhile */
    }
  }
  const out: number[] = [];
  const todo = [pid];
  while (todo.length > 0) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** The processes in a network namespace (a sandbox with a network of its own is not among them: `tree` finds those). */
function namespacePids(ns: string): number[] {
  try {
    return execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * A host's power cut: every process of it stopped first (so none forks or reaps meanwhile), then
 * SIGKILLed: the worker, its harnesses, sandboxes and evaluators die at one instant.
 */
export function killHost(w: HostWorker): number {
  const found = () => [...new Set([...tree(w.child.pid!), ...namespacePids(w.name)])];
  const signal = (pids: number[], s: NodeJS.Signals) => {
    for (const p of pids) {
      try {
        process.kill(p, s);
      } catch {
        /* already gone */
      }
    }
  };
  signal(found(), 'SIGSTOP');
  const all = found();
  signal(all, 'SIGKILL');
  return all.length;
}

/**
 * The host's cable pulled: the bridge's end of its veth pair goes down. Inside, the link stays up
 * with no carrier and its routes stay, so packets are lost silently, as on a real cut, rather than
 * refused at once.
 */
export function cableOf(ns: string): string {
  const inside = execFileSync('ip', ['-n', ns, '-o', 'link', 'show'], { encoding: 'utf8' });
  const peer = /@if(\d+):/.exec(inside)?.[1];
  if (!peer) throw new Error(`no veth found in namespace ${ns}:\n${inside}`);
  const outside = execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' });
  const name = new RegExp(`^${peer}: ([^@:]+)[@:]`, 'm').exec(outside)?.[1];
  if (!name) throw new Error(`the bridge end (ifindex ${peer}) of ${ns}'s veth is not in this namespace`);
  return name;
}

export function setCable(device: string, up: boolean): void {
  execFileSync('ip', ['link', 'set', device, up ? 'up' : 'down'], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Resolves once the child has exited, SIGKILLing its tree after `ms`. */
export function exited(w: HostWorker, ms: number): Promise<void> {
  const c = w.child;
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => killHost(w), ms);
    c.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
