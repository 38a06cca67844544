import { describe, mapping, text } from './fields.js';
import { refusal } from './interpolate.js';
import type { ComposeNetwork } from './plan.js';

/** A service's `networks` (list of names, or map name → {aliases}): its networks and extra aliases. */
export function serviceNetworks(value: unknown, where: string): { names: string[]; aliases: string[] } {
  if (value === undefined || value === null) return { names: ['default'], aliases: [] };
  if (Array.isArray(value)) return { names: value.map((v, i) => text(v, `${where}[${i}]`)), aliases: [] };
  const map = mapping(value);
  if (!map) throw refusal(where, `expected a list or a mapping, got ${describe(value)}`);
  const aliases: string[] = [];
  for (const [name, v] of Object.entries(map)) {
    const opts = v === null ? {} : mapping(v);
    if (!opts) throw refusal(`${where}.${name}`, `expected a mapping, got ${describe(v)}`);
    for (const key of Object.keys(opts)) if (key !== 'aliases') throw refusal(`${where}.${name}`, `\`${key}\` is not supported by polar yet`);
    if (opts.aliases !== undefined) {
      if (!Array.isArray(opts.aliases)) throw refusal(`${where}.${name}.aliases`, `expected a list, got ${describe(opts.aliases)}`);
      opts.aliases.forEach((a, i) => aliases.push(text(a, `${where}.${name}.aliases[${i}]`)));
    }
  }
  return { names: Object.keys(map), aliases };
}

const NETWORK_KEYS_IGNORED = new Set(['attachable', 'labels']);

/**
 * The one network polar makes for the file. Compose gives every service the project's `default`
 * network unless it names others; polar joins all services (and `main`) on one network, so a file
 * whose services are on different networks (isolating some from others) is refused. Of a top-level
 * network's keys, `internal` is kept (no outside access), `driver: bridge`, `attachable` and
 * `labels` change nothing here; the rest are refused.
 */
export function oneNetwork(used: ReadonlyMap<string, readonly string[]>, topLevel: unknown): ComposeNetwork {
  const distinct = [...new Set([...used.values()].flat())];
  if (distinct.length !== 1) {
    const who = [...used].map(([service, names]) => `${service}: ${names.join(', ')}`).join('; ');
    throw refusal('networks', `polar joins all services and main on one network, and these are on several (${who})`);
  }
  const name = distinct[0] as string;
  const defs = topLevel === undefined || topLevel === null ? {} : mapping(topLevel);
  if (!defs) throw refusal('networks', `expected a mapping, got ${describe(topLevel)}`);
  if (name !== 'default' && !(name in defs)) throw refusal('networks', `the services use network ${name}, which the file does not define`);
  const def = defs[name] === undefined || defs[name] === null ? {} : mapping(defs[name]);
  if (!def) throw refusal(`networks.${name}`, `expected a mapping, got ${describe(defs[name])}`);
  for (const [key, v] of Object.entries(def)) {
    if (key === 'internal' || NETWORK_KEYS_IGNORED.has(key) || key.startsWith('x-')) continue;
    if (key === 'driver' && v === 'bridge') continue;
    throw refusal(`networks.${name}`, `\`${key}\` is not supported by polar yet`);
  }
  if (def.internal !== undefined && typeof def.internal !== 'boolean')
    throw refusal(`networks.${name}.internal`, `expected true or false, got ${describe(def.internal)}`);
  return { name, internal: def.internal === true };
}
