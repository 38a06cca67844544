import fs from 'node:fs';
import path from 'node:path';
import type { Yaml } from '../yaml.js';
import { mergeWithOverride } from './merge.js';

/**
 * The pinned list of what NeMo-RL and NeMo Gym read on the paths polar's runs take
 * (fixtures/nemo-rl/contract.json, written by scripts/nemo-rl-contract/build.py from their source at
 * the pinned commits). Pure checks over it: which keys a merged config must hold, and what moved in
 * another checkout. Facts only (key paths, file:line); no NeMo-RL code.
 */
export type RunKind = 'grpo' | 'sft';

export interface ContractRead {
  /** A dotted key path; `data.train[].x` is `x` of each data.train entry, data.default filled in. */
  key: string;
  file: string;
  lines: number[];
  /** Why the run polar starts does not reach this read (absent: it does). */
  off_path?: string;
  /** The text the pinned line holds, where the read is not a subscript (a parameter, a `.get`). */
  match?: string;
  /** Why a missing key raises nothing here (a `.get`, a membership test), and what then goes wrong. */
  guarded?: string;
  note?: string;
}

/** A read known at the pin that cannot crash (guarded) or was judged by hand: not new to a scan. */
export interface ReviewedRead {
  key: string;
  file: string;
  lines: number[];
}

/** `key` is `is`: a condition on the merged config. */
export interface KeyIs {
  key: string;
  is: Yaml;
}

/** `key` is a number no greater than `at_most` (NeMo-RL's `assert x <= n`). */
export interface KeyAtMost {
  key: string;
  at_most: number;
}

export interface Contract {
  pinned: { nemo_rl: { repo: string; commit: string }; gym: { repo: string; commit: string } };
  runs: Record<RunKind, { entry: string; base: string; base_keys: string; files: string[] }>;
  reads: Record<RunKind, ContractRead[]>;
  reviewed: Record<RunKind, ReviewedRead[]>;
  filled: { key: string; file: string; line: number; run: RunKind }[];
  typed_required: Record<RunKind, { key: string; file: string; line: number }[]>;
  /**
   * Each assert is evaluated one way: `holds`, what the merged config must say for it to pass (only
   * `when` its conditions hold); `always`, why polar's runs cannot fail it; `checked_by`, the polar
   * code that keeps the data or the /run answer within it.
   */
  asserts: {
    run: RunKind;
    on: string;
    file: string;
    line: number;
    what: string;
    holds?: (KeyIs | KeyAtMost)[];
    when?: KeyIs[];
    always?: string;
    checked_by?: string;
  }[];
  /** /run: what NeMo-RL / Gym send the agent, and what they read of its answer (`required`: unguarded). */
  gym_run: { request: GymRunField[]; response: GymRunField[] };
  /** Datasets polar names, with the parameters their constructors take. */
  datasets: { name: string; run: RunKind; file: string; line: number; params: string[] }[];
  /** The Gym submodule (path in the NeMo-RL checkout) and the files in it a run relies on. */
  gym: { root: string; files: { path: string; why: string }[] };
}

export interface GymRunField {
  field: string;
  repo: 'RL' | 'Gym';
  file: string;
  line: number;
  note?: string;
  required?: boolean;
}

export const CONTRACT_DIR = path.resolve(import.meta.dirname, '..', '..', '..', 'fixtures', 'nemo-rl');

export function loadContract(dir = CONTRACT_DIR): Contract {
  return JSON.parse(fs.readFileSync(path.join(dir, 'contract.json'), 'utf8')) as Contract;
}

/** The base config's key paths as the pinned list records them (fixtures/nemo-rl/<base>.keys). */
export function baseKeys(kind: RunKind, contract: Contract, dir = CONTRACT_DIR): string[] {
  return fs
    .readFileSync(path.join(dir, contract.runs[kind].base_keys), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'));
}

/** A config tree holding just these key paths (values are placeholders): the base config's shape. */
export function treeOfKeys(keys: readonly string[]): Yaml {
  const root: { [k: string]: Yaml } = {};
  for (const key of keys) {
    const parts = key.split('.');
    let node = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) {
        if (!(part in node)) node[part] = '<base>';
        return;
      }
      const next = node[part];
      if (!isMap(next)) node[part] = {};
      node = node[part] as { [k: string]: Yaml };
    });
  }
  return root;
}

/**
 * Every key the run reads unguarded, or pydantic requires, that the run reaches: the reads not
 * marked off-path and not filled in by NeMo-RL itself, and the required TypedDict fields whose
 * parent section is there (a field of an optional section counts only when the section is present).
 */
export function requiredKeys(kind: RunKind, contract: Contract, merged: Yaml): { key: string; at: string }[] {
  const filled = new Set(contract.filled.filter((f) => f.run === kind).map((f) => f.key));
  const out = new Map<string, string>();
  for (const r of contract.reads[kind]) {
    if (r.off_path || r.guarded || filled.has(r.key)) continue;
    if (!out.has(r.key)) out.set(r.key, `${r.file}:${r.lines.join(',')}`);
  }
  for (const t of contract.typed_required[kind]) {
    const parent = t.key.split('.').slice(0, -1).join('.');
    if (parent && !isMap(get(merged, parent))) continue;
    if (!out.has(t.key)) out.set(t.key, `${t.file}:${t.line} (pydantic)`);
  }
  return [...out].map(([key, at]) => ({ key, at }));
}

/**
 * The config asserts of the list that a merged config fails, each as `file:line: what (key is …, must
 * be …)`. A value the merged config cannot say yet (the base's `${…}` interpolations, resolved by
 * OmegaConf at load; the key list's placeholder) is not judged; a missing key fails.
 */
export function failedAsserts(kind: RunKind, contract: Contract, merged: Yaml): string[] {
  const out: string[] = [];
  for (const a of contract.asserts) {
    if (a.run !== kind || !a.holds) continue;
    if (a.when && !a.when.every((w) => valuesAt(merged, w.key).every((v) => v !== undefined && sameValue(v, w.is)))) continue;
    const failed = a.holds.flatMap((h) => {
      const values = valuesAt(merged, h.key);
      const must = 'at_most' in h ? `at most ${h.at_most}` : JSON.stringify(h.is);
      if (values.length === 0 || values.includes(undefined)) return [`${h.key} is missing, must be ${must}`];
      const holds = (v: Yaml) => ('at_most' in h ? typeof v === 'number' && v <= h.at_most : sameValue(v, h.is));
      const wrong = values.find((v) => !unknownValue(v) && !holds(v!));
      return wrong === undefined ? [] : [`${h.key} is ${JSON.stringify(wrong)}, must be ${must}`];
    });
    if (failed.length > 0) out.push(`${a.file}:${a.line}: ${a.what} (${failed.join('; ')})`);
  }
  return out;
}

/** treeOfKeys's placeholder for a base value. */
export const BASE_PLACEHOLDER = '<base>';

function unknownValue(v: Yaml | undefined): boolean {
  return v === BASE_PLACEHOLDER || (typeof v === 'string' && v.includes('${'));
}

function sameValue(a: Yaml, b: Yaml): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The values a key path names in a config: one for a plain path (undefined when absent), one per
 * entry for `list[].key`. A list key may hold one entry as a map, or a list of them; each is filled
 * from the `default` beside the list first, as NeMo-RL does for data.train (data/utils.py:171-177,
 * examples/run_sft.py:72-78 at 7ea279a: a default key goes in only where the entry lacks it).
 */
export function valuesAt(config: Yaml, dotted: string): (Yaml | undefined)[] {
  const at = dotted.indexOf('[].');
  if (at < 0) return [has(config, dotted) ? get(config, dotted) : undefined];
  const listKey = dotted.slice(0, at);
  const rest = dotted.slice(at + 3);
  const list = get(config, listKey);
  const entries = Array.isArray(list) ? list : isMap(list) ? [list] : [];
  const parent = listKey.split('.').slice(0, -1);
  const fallback = get(config, [...parent, 'default'].join('.'));
  return entries.map((e) => {
    const entry = isMap(fallback) && isMap(e) ? { ...fallback, ...e } : e;
    return has(entry, rest) ? get(entry, rest) : undefined;
  });
}

/** The required keys a merged config lacks, each with where NeMo-RL reads it. */
export function missingKeys(kind: RunKind, contract: Contract, merged: Yaml): { key: string; at: string }[] {
  return requiredKeys(kind, contract, merged).filter((r) => {
    const values = valuesAt(merged, r.key);
    return values.length === 0 || values.includes(undefined);
  });
}

/**
 * Polar's generated config merged onto the base config by NeMo-RL's rule, the base given as the
 * pinned key list (so this runs without a checkout). A `defaults` key in polar's config is dropped:
 * it names the base this stands for.
 */
export function mergeOntoBaseKeys(kind: RunKind, generated: Yaml, contract: Contract, dir = CONTRACT_DIR): Yaml {
  const own = isMap(generated) ? Object.fromEntries(Object.entries(generated).filter(([k]) => k !== 'defaults')) : generated;
  return mergeWithOverride(treeOfKeys(baseKeys(kind, contract, dir)), own);
}

export function has(config: Yaml, dotted: string): boolean {
  let node: Yaml | undefined = config;
  for (const k of dotted.split('.')) {
    if (!isMap(node) || !(k in node)) return false;
    node = node[k];
  }
  return true;
}

function get(config: Yaml, dotted: string): Yaml | undefined {
  let node: Yaml | undefined = config;
  for (const k of dotted.split('.')) {
    if (!isMap(node)) return undefined;
    node = node[k];
  }
  return node;
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
