import { execFileSync } from 'node:child_process';

/** Why network namespaces cannot be made here, or null. */
export function namespacesUnavailable(): string | null {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'making network namespaces and veth pairs needs root (ip netns add)';
  try {
    execFileSync('ip', ['-V'], { stdio: 'ignore' });
    execFileSync('unshare', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'the ip (iproute2) and unshare (util-linux) commands are needed';
  }
  return null;
}

let made = 0;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Simulated machines: each a network namespace on a bridge in this one, reached at its own address. */
export interface Hosts {
  /** This namespace's address on the bridge: what the hosts reach this machine's servers at. */
  hub: string;
  subnet: string;
  hosts: { name: string; address: string }[];
  /** `argv` run on host `i`, in its own namespace and with its own hostname: the command line to spawn. */
  command(i: number, argv: string[]): [string, string[]];
  remove(): void;
}

/**
 * `count` hosts on a new bridge 10.{octet}.0.0/24 (this namespace is .1, host i is .(i+2)), named
 * `{prefix}-{i}`: their own network (loopback included) and, through `command`, their own hostname.
 */
export function makeHosts(prefix: string, octet: number, count: number): Hosts {
  // The pid names this run's (so a later run can tell them stale), the count this call's.
  const id = `${process.pid}n${made++ % 10}`;
  const bridge = `pbr${id}`;
  const subnet = `10.${octet}.0.0/24`;
  const hub = `10.${octet}.0.1`;
  const namespaces: string[] = [];
  const remove = () => {
    for (const ns of namespaces) {
      try {
        ip('netns', 'del', ns);
      } catch {
        /* already gone */
      }
    }
    try {
      ip('link', 'del', bridge);
    } catch {
      /* already gone */
    }
  };
  removeStale(prefix);
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${hub}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    const hosts: { name: string; address: string }[] = [];
    for (let i = 0; i < count; i++) {
      const ns = `${prefix}-${id}-${i}`;
      const [outside, inside] = [`pvo${id}x${i}`, `pvi${id}x${i}`];
      ip('netns', 'add', ns);
      namespaces.push(ns);
      ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', inside);
      ip('link', 'set', inside, 'netns', ns);
      ip('link', 'set', outside, 'master', bridge);
      ip('link', 'set', outside, 'up');
      const address = `10.${octet}.0.${i + 2}`;
      ip('-n', ns, 'addr', 'add', `${address}/24`, 'dev', inside);
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'set', inside, 'up');
      hosts.push({ name: ns, address });
    }
    return {
      hub,
      subnet,
      hosts,
      command: (i, argv) => ['ip', ['netns', 'exec', hosts[i]!.name, 'unshare', '--uts', 'sh', '-c', 'hostname "$0" && exec "$@"', hosts[i]!.name, ...argv]],
      remove,
    };
  } catch (err) {
    remove();
    throw err;
  }
}

/** What a killed test run left (its namespaces and bridge, named by its pid): gone, so its addresses do not shadow this run's. */
function removeStale(prefix: string): void {
  const alive = (pid: string) => {
    try {
      process.kill(Number(pid), 0);
      return true;
    } catch {
      return false;
    }
  };
  const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const m of namespaces.matchAll(new RegExp(`^(${prefix}-(\\d+)n\\d+-\\d+)`, 'gm'))) if (!alive(m[2]!)) ip('netns', 'del', m[1]!);
  const links = execFileSync('ip', ['-o', 'link', 'show', 'type', 'bridge'], { encoding: 'utf8' });
  for (const m of links.matchAll(/^\d+: (pbr(\d+)n\d+):/gm)) if (!alive(m[2]!)) ip('link', 'del', m[1]!);
}
