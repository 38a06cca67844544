import path from 'node:path';
import { isRecord } from '../../core/chat.js';
import type { HarborAllowlist } from './types.js';

/**
 * task.toml fields shared by its tables ([environment] and [verifier.environment] have one schema,
 * config.py:324-380 and :480-491), each checked and reported with its file and field. Line numbers
 * are Harbor's source at the fork snapshot 15735640198/harbor f276a3b.
 */

/**
 * Says what is wrong with a task: the file, its field (null: the whole file) and what it must be.
 * `ignored` hears of a key Harbor's model does not define (pydantic ignores it: no model in
 * models/task/config.py sets `extra`), `allowlist` of a `network_mode = "allowlist"`; both are
 * notes, not problems.
 */
export type Report = ((file: string, field: string | null, what: string) => void) & {
  ignored?: (field: string, model: string) => void;
  allowlist?: (list: HarborAllowlist) => void;
};

/** Every key of `table` that `known` lacks, told to `at.ignored` as Harbor's `model` ignores it. */
export function ignoreUnknown(table: Record<string, unknown>, known: ReadonlySet<string>, prefix: string, model: string, at: Report): void {
  for (const key of Object.keys(table)) if (!known.has(key)) at.ignored?.(prefix === '' ? key : `${prefix}.${key}`, model);
}

/** [agent].user / [verifier].user: a user name or a uid, as the engine's `exec --user` takes it. */
export function stageUser(value: unknown, field: string, at: Report): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(value)) return value;
  at('task.toml', field, 'a user name or a uid');
  return undefined;
}

/** Harbor's size strings (config.py:390-403): "2G", "512M", "1024K", in MB. */
function sizeToMb(size: string): number | null {
  const m = /^\s*([0-9]*\.?[0-9]+)\s*([GMK])\s*$/i.exec(size);
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2]!.toUpperCase();
  return Math.floor(unit === 'G' ? n * 1024 : unit === 'M' ? n : n / 1024);
}

/** [environment].memory_mb, or the deprecated `memory` string (both must agree when both are given). */
function readMemory(environment: Record<string, unknown>, table: string, at: Report): number | undefined {
  let mb: number | undefined;
  if (environment.memory_mb !== undefined) {
    if (typeof environment.memory_mb !== 'number' || !Number.isInteger(environment.memory_mb) || environment.memory_mb <= 0)
      at('task.toml', `${table}.memory_mb`, 'a positive whole number of MB');
    else mb = environment.memory_mb;
  }
  if (environment.memory !== undefined) {
    const legacy = typeof environment.memory === 'string' ? sizeToMb(environment.memory) : null;
    if (legacy === null || legacy <= 0) at('task.toml', `${table}.memory`, 'a size such as "2G" or "512M" (or use memory_mb)');
    else if (mb !== undefined && mb !== legacy) at('task.toml', `${table}.memory`, `${legacy} MB conflicts with memory_mb = ${mb}`);
    else mb = legacy;
  }
  return mb === undefined ? undefined : mb * 1024 * 1024;
}

/** Harbor's [environment].build_timeout_sec default (config.py:325: `build_timeout_sec: float = 600.0`). */
export const DEFAULT_BUILD_TIMEOUT_SEC = 600;

/** An environment table's container settings (config.py:324-380): workdir, cpus, memory, docker_image, build_timeout_sec. */
export interface EnvironmentFields {
  /** `workdir`, which wins over the Dockerfile's WORKDIR. */
  workdirSetting: string | null;
  cpus: number | undefined;
  memoryBytes: number | undefined;
  dockerImage: string | null;
  /**
   * `build_timeout_sec` (Harbor's default 600, config.py:325): how long the image build may take.
   * Harbor waits that long for the environment's start, build included, apart from the agent's
   * timeout (trial/trial.py:925-929, :990-999); so does polar, before the sample's budget starts.
   */
  buildTimeoutSec: number;
}

/** [environment] (or [verifier.environment], same schema): its container settings. */
export function readEnvironmentTable(environment: Record<string, unknown>, at: Report, table = 'environment'): EnvironmentFields {
  let workdirSetting: string | null = null;
  if (environment.workdir !== undefined) {
    if (typeof environment.workdir !== 'string' || !environment.workdir.startsWith('/')) at('task.toml', `${table}.workdir`, 'an absolute path');
    else workdirSetting = path.posix.resolve(environment.workdir);
  }
  let cpus: number | undefined;
  if (environment.cpus !== undefined) {
    if (typeof environment.cpus !== 'number' || !(environment.cpus > 0)) at('task.toml', `${table}.cpus`, 'a positive number');
    else cpus = environment.cpus;
  }
  let dockerImage: string | null = null;
  if (environment.docker_image !== undefined) {
    if (typeof environment.docker_image !== 'string' || environment.docker_image.trim() === '') at('task.toml', `${table}.docker_image`, 'an image name');
    else dockerImage = environment.docker_image;
  }
  const buildTimeoutSec = seconds(environment.build_timeout_sec, `${table}.build_timeout_sec`, at) ?? DEFAULT_BUILD_TIMEOUT_SEC;
  return { workdirSetting, cpus, memoryBytes: readMemory(environment, table, at), dockerImage, buildTimeoutSec };
}

export function seconds(v: unknown, field: string, at: Report): number | null {
  if (v === undefined) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
    at('task.toml', field, 'seconds, a positive number');
    return null;
  }
  return v;
}

export function stringMap(v: unknown, field: string, at: Report): Record<string, string> {
  if (v === undefined) return {};
  if (!isRecord(v) || Object.values(v).some((x) => typeof x !== 'string')) {
    at('task.toml', field, 'a table of strings');
    return {};
  }
  return v as Record<string, string>;
}

/**
 * A table's network setting: `allow_internet` (the 1.0/1.1 field, deprecated later for
 * `network_mode`, config.py:373-379 and :782-795) or `network_mode` ("public", "no-network",
 * "allowlist" with `allowed_hosts`, config.py:35-176). An allowlist is loaded (told to
 * `at.allowlist`) and read as `none`: polar's sandbox cannot reach hosts by name, and no network is
 * the strictest reading of a list (nothing off it is reached). Phase tables ([agent], [verifier]) only override.
 */
export function network(t: Record<string, unknown>, table: string, at: Report, phase = false): 'public' | 'none' | null {
  const hosts = allowedHosts(t, table, at);
  // network_mode, when set, wins over the legacy field (config.py:788-792).
  if (t.network_mode !== undefined) {
    if (t.network_mode === 'public') return 'public';
    if (t.network_mode === 'no-network') return 'none';
    if (t.network_mode === 'allowlist') {
      at.allowlist?.({ table, hosts: hosts ?? [] });
      return 'none';
    }
    at('task.toml', `${table}.network_mode`, '"public", "no-network" or "allowlist" (NetworkMode, config.py:35-41)');
    return null;
  }
  if (t.allow_internet !== undefined) {
    if (typeof t.allow_internet !== 'boolean') at('task.toml', `${table}.allow_internet`, 'true or false');
    else if (!phase) return t.allow_internet ? 'public' : 'none';
  }
  return null;
}

/** `allowed_hosts`, checked as Harbor does (config.py:58-116): host names or `*.suffix`, and only with "allowlist". */
function allowedHosts(t: Record<string, unknown>, table: string, at: Report): string[] | null {
  const v = t.allowed_hosts;
  if (v === undefined) return null;
  const field = `${table}.allowed_hosts`;
  if (!Array.isArray(v) || v.some((h) => typeof h !== 'string')) {
    at('task.toml', field, 'a list of host names');
    return null;
  }
  if (t.network_mode !== 'allowlist')
    at('task.toml', field, 'only valid with network_mode = "allowlist": Harbor\'s own validator rejects it too (config.py:101-116)');
  const label = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
  const hosts = (v as string[]).map((h) => h.trim().toLowerCase().replace(/\.$/, ''));
  for (const h of hosts) {
    const name = h.startsWith('*.') ? h.slice(2) : h;
    if (name === '' || /:\/\/|[/:]/.test(h) || name.includes('*') || !name.split('.').every((l) => label.test(l)))
      at('task.toml', field, `${JSON.stringify(h)} is not a host name or a leading "*." pattern: Harbor's own validator rejects it too (config.py:58-95)`);
  }
  return hosts;
}
