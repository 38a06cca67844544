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
  key: string;
  file: string;
  lines: number[];
  /** Why the run polar starts does not reach this read (absent: it does). */
  off_path?: string;
}

export interface Contract {
  pinned: { nemo_rl: { repo: string; commit: string }; gym: { repo: string; commit: string } };
  runs: Record<RunKind, { entry: string; base: string; base_keys: string; files: string[] }>;
  reads: Record<RunKind, ContractRead[]>;
  filled: { key: string; file: string; line: number; run: RunKind }[];
  typed_required: Record<RunKind, { key: string; file: string; line: number }[]>;
  /** `holds`: what polar's config must say for the assert to pass (where it can be said as key = value). */
  asserts: { run: RunKind; on: string; file: string; line: number; what: string; holds?: { key: string; is: Yaml }[] }[];
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
    if (r.off_path || filled.has(r.key)) continue;
    if (!out.has(r.key)) out.set(r.key, `${r.file}:${r.lines.join(',')}`);
  }
  for (const t of contract.typed_required[kind]) {
    const parent = t.key.split('.').slice(0, -1).join('.');
    if (parent && !isMap(get(merged, parent))) continue;
    if (!out.has(t.key)) out.set(t.key, `${t.file}:${t.line} (pydantic)`);
  }
  return [...out].map(([key, at]) => ({ key, at }));
}

/** The config asserts of the list that a merged config fails, each as `file:line: what`. */
export function failedAsserts(kind: RunKind, contract: Contract, merged: Yaml): string[] {
  return contract.asserts
    .filter((a) => a.run === kind && a.holds?.some((h) => !has(merged, h.key) || get(merged, h.key) !== h.is))
    .map((a) => `${a.file}:${a.line}: ${a.what}`);
}

/** The required keys a merged config lacks, each with where NeMo-RL reads it. */
export function missingKeys(kind: RunKind, contract: Contract, merged: Yaml): { key: string; at: string }[] {
  return requiredKeys(kind, contract, merged).filter((r) => !has(merged, r.key));
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
