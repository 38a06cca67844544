import dns from 'node:dns/promises';
import net from 'node:net';
import { PolarError } from '../../core/errors.js';
import type { SourceFilter } from '../../core/http/guard.js';

/**
 * `polar gym-agent --allow-from`: the source addresses a gym-agent beyond loopback answers. NeMo Gym
 * calls an agent's `/run` with nothing a token could ride on: `ServerClient.request` builds
 * `http://{host}:{port}{path}` from the instance's config and sends it through one aiohttp session
 * created with no default headers, a `DummyCookieJar` and no auth (Gym `c3bac96`
 * nemo_gym/server_utils.py:147-159, :207-214, :325-359; the only header it adds is
 * `Content-Type: application/json`). So where a token cannot be sent, the agent admits callers by
 * the address their connection comes from: the trainer node's, which NeMo-RL's NemoGym actor runs on
 * (NeMo-RL `7ea279a` nemo_rl/environments/nemo_gym.py:688-690). Loopback callers are this machine,
 * as on a loopback-bound agent.
 */
export type SourceAllowList = SourceFilter;

/**
 * Parses `--allow-from` entries: an address (`10.0.0.2`, `fd00::2`), a subnet (`10.0.0.0/24`), or a
 * host name, resolved once now to all its addresses (a name that resolves to none is refused: it
 * would admit nobody, silently).
 */
export async function sourceAllowList(entries: readonly string[], lookup: (name: string) => Promise<string[]> = lookupAll): Promise<SourceAllowList> {
  const list = new net.BlockList();
  const described: string[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    if (!entry) continue;
    const slash = entry.indexOf('/');
    if (slash >= 0) {
      const address = bare(entry.slice(0, slash));
      const prefix = Number(entry.slice(slash + 1));
      const family = net.isIP(address);
      if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) {
        throw new PolarError('POLAR_USAGE', `--allow-from ${entry}: not a subnet (ADDRESS/PREFIX, e.g. 10.0.0.0/24 or fd00::/64)`);
      }
      list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      described.push(entry);
      continue;
    }
    const address = bare(entry);
    if (net.isIP(address)) {
      addAddress(list, address);
      described.push(address);
      continue;
    }
    let addresses: string[];
    try {
      addresses = await lookup(entry);
    } catch (err) {
      throw new PolarError(
        'POLAR_USAGE',
        `--allow-from ${entry}: the name does not resolve here (${(err as Error).message}); give the trainer node's address or subnet`,
        undefined,
        { cause: err },
      );
    }
    if (addresses.length === 0) throw new PolarError('POLAR_USAGE', `--allow-from ${entry}: the name resolves to no address here`);
    for (const a of addresses) addAddress(list, a);
    described.push(`${entry} (${addresses.join(', ')})`);
  }
  if (described.length === 0) throw new PolarError('POLAR_USAGE', '--allow-from needs at least one address, subnet or host name');
  return {
    flag: '--allow-from',
    described: described.join(', '),
    allows(address) {
      if (!address) return false;
      const a = unmapped(address);
      if (isLoopbackAddress(a)) return true;
      const family = net.isIP(a);
      return family !== 0 && list.check(a, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

function addAddress(list: net.BlockList, address: string): void {
  const a = unmapped(address);
  list.addAddress(a, net.isIP(a) === 6 ? 'ipv6' : 'ipv4');
}

async function lookupAll(name: string): Promise<string[]> {
  return (await dns.lookup(name, { all: true })).map((r) => r.address);
}

/** `[fd00::2]` → `fd00::2`. */
function bare(value: string): string {
  return value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
}

/** A dual-stack socket reports IPv4 peers as `::ffff:10.0.0.2`. */
function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}

function isLoopbackAddress(address: string): boolean {
  return address === '::1' || /^127\.\d+\.\d+\.\d+$/.test(address);
}
