import fs from 'node:fs';
import path from 'node:path';
import { isRecord } from '../../core/chat.js';
import { readDockerfile } from './dockerfile.js';
import { type EnvironmentFields, ignoreUnknown, network, readEnvironmentTable, type Report, seconds, stageUser } from './toml-fields.js';
import type { HarborArtifact, HarborCollect, HarborTrial, SeparateVerifier } from './types.js';

/**
 * Where a Harbor task's verifier runs and what reaches it from the agent's environment: `[verifier]
 * environment_mode`, `[verifier.environment]`, `[[verifier.collect]]` and the top-level `artifacts`.
 * Read from Harbor's source at the fork snapshot 15735640198/harbor f276a3b (the facts, with lines,
 * are in the runner's notes): models/task/config.py:457-513 (the mode and its table), :542-659
 * (artifacts and collect hooks), models/task/verifier_mode.py:10-64 (how the mode resolves),
 * trial/trial.py:463-592 (the separate run: tests/ is the image's build context).
 */

/** The agent's publish folder, always carried to a separate verifier (models/task/artifacts.py:62-78). */
export const CONVENTION_ARTIFACTS = '/logs/artifacts';
/** A compose service's name (_COMPOSE_SERVICE_NAME_PATTERN, config.py:19-32). */
const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const DEFAULT_COLLECT_TIMEOUT = 60;
const ARTIFACT_KEYS = new Set(['source', 'destination', 'exclude', 'service']);
const COLLECT_KEYS = new Set(['command', 'service', 'timeout_sec', 'user']);

export interface VerifierSetup {
  verifierMode: HarborTrial['verifierMode'];
  separateVerifier: SeparateVerifier | null;
  artifacts: HarborArtifact[];
  collect: HarborCollect[];
}

/**
 * The verifier's setup from task.toml's tables. `phaseNetwork` is [verifier]'s own network override
 * and `base` [environment]'s settings, which a separate verifier without [verifier.environment]
 * inherits (a fresh copy of [environment], verifier_mode.py:60-64).
 */
export function readVerifierSetup(
  config: Record<string, unknown>,
  verifier: Record<string, unknown>,
  base: EnvironmentFields & { network: 'public' | 'none' | null },
  phaseNetwork: 'public' | 'none' | null,
  dir: string,
  at: Report,
): VerifierSetup {
  let mode: 'shared' | 'separate' | null = null;
  if (verifier.environment_mode !== undefined) {
    if (verifier.environment_mode === 'shared' || verifier.environment_mode === 'separate') mode = verifier.environment_mode;
    else at('task.toml', 'verifier.environment_mode', '"shared" or "separate"');
  }
  let own: Record<string, unknown> | null = null;
  if (verifier.environment !== undefined) {
    if (!isRecord(verifier.environment)) at('task.toml', 'verifier.environment', 'a table ([verifier.environment], the same keys as [environment])');
    else own = verifier.environment;
  }
  if (mode === 'shared' && own)
    at('task.toml', 'verifier.environment', 'conflicts with environment_mode = "shared": drop the table, or set environment_mode = "separate"');
  // A [verifier.environment] table alone means separate (verifier_mode.py:17-21).
  const verifierMode = mode ?? (own ? 'separate' : null);
  return {
    verifierMode,
    separateVerifier: verifierMode === 'separate' ? readSeparate(own, base, phaseNetwork, dir, at) : null,
    artifacts: readArtifacts(config.artifacts, at),
    collect: readCollect(verifier.collect, at),
  };
}

/** The separate verifier's environment: its image from tests/ (or docker_image), workdir, network, resources. */
function readSeparate(
  own: Record<string, unknown> | null,
  base: EnvironmentFields & { network: 'public' | 'none' | null },
  phaseNetwork: 'public' | 'none' | null,
  dir: string,
  at: Report,
): SeparateVerifier {
  const fields = own ? { ...readEnvironmentTable(own, at, 'verifier.environment'), network: network(own, 'verifier.environment', at) } : base;
  const context = path.join(dir, 'tests');
  const dockerfile = path.join(context, 'Dockerfile');
  const text = readText(dockerfile);
  if (text === null && !fields.dockerImage)
    at(
      'tests/Dockerfile',
      null,
      `missing: a separate verifier's image is built from tests/ (or give ${own ? '[verifier.environment]' : '[environment]'}.docker_image)`,
    );
  return {
    context,
    dockerfile: text === null ? null : dockerfile,
    image: fields.dockerImage,
    inherited: own === null,
    workdir: fields.workdirSetting ?? (text === null ? null : readDockerfile(text, '/').workdir),
    network: phaseNetwork ?? fields.network,
    ...(fields.cpus !== undefined ? { cpus: fields.cpus } : {}),
    ...(fields.memoryBytes !== undefined ? { memoryBytes: fields.memoryBytes } : {}),
    buildTimeoutSec: fields.buildTimeoutSec,
  };
}

/** An `artifacts` list, the task's (config.py:723) or a step's (:683-688): paths in the agent's environment (ArtifactConfig, :542-625). */
export function readArtifacts(value: unknown, at: Report, name = 'artifacts'): HarborArtifact[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    at('task.toml', name, 'a list of paths or { source = "…" } tables');
    return [];
  }
  const out: HarborArtifact[] = [];
  value.forEach((entry, i) => {
    const field = `${name}[${i}]`;
    const table: Record<string, unknown> | null = typeof entry === 'string' ? { source: entry } : isRecord(entry) ? entry : null;
    if (!table) return at('task.toml', field, 'a path, or a table with source (and destination, exclude, service)');
    ignoreUnknown(table, ARTIFACT_KEYS, field, 'ArtifactConfig', at);
    const source = artifactSource(table.source, `${field}.source`, at);
    const destination = artifactDestination(table.destination, `${field}.destination`, at);
    const exclude = stringList(table.exclude, `${field}.exclude`, at);
    const service = serviceName(table.service, `${field}.service`, at);
    if (service === null || source === null || destination === undefined || exclude === null) return;
    // A sidecar's artifact must name an absolute path (config.py:615-625); polar resolved a relative one from /.
    if (service !== undefined && service !== 'main' && !String(table.source).startsWith('/'))
      return at('task.toml', `${field}.source`, `an absolute path: it is taken from the compose service "${service}" (config.py:615-625)`);
    out.push({ source, destination, exclude, ...(service !== undefined ? { service } : {}) });
  });
  return out;
}

/**
 * A path in the agent's environment, with no `..` (config.py:563-575). A relative one is taken from
 * the root, as `docker cp` takes a container path (what Harbor copies with, docker_unix.py:48-72).
 */
function artifactSource(v: unknown, field: string, at: Report): string | null {
  if (typeof v !== 'string' || v.trim() === '') {
    at('task.toml', field, 'a path in the agent\'s environment, such as "/app/out.json"');
    return null;
  }
  if (v.split('/').includes('..')) {
    at('task.toml', field, `must not contain "..": ${JSON.stringify(v)}`);
    return null;
  }
  return path.posix.resolve('/', v);
}

/** Where Harbor keeps a copy under the trial's artifacts/ (config.py:577-613); null: it mirrors the source. */
function artifactDestination(v: unknown, field: string, at: Report): string | null | undefined {
  if (v === undefined || v === '') return null;
  const bad = (what: string) => {
    at('task.toml', field, what);
    return undefined;
  };
  if (typeof v !== 'string') return bad('a relative path');
  if (v.includes('\\')) return bad('a path with forward slashes');
  if (v.startsWith('/')) return bad("a relative path (under the trial's artifacts/)");
  if (v.split('/').includes('..')) return bad('must not contain ".."');
  if (v.replace(/\/+$/, '') === 'manifest.json') return bad('manifest.json is reserved for the collection manifest');
  return v;
}

/**
 * A compose service's name (_validate_compose_service_name, config.py:22-32), stripped; undefined
 * when absent, null when Harbor rejects it. Loaded as written: running a sidecar's hook or taking a
 * sidecar's artifact is the compose environment's.
 */
function serviceName(v: unknown, field: string, at: Report): string | undefined | null {
  if (v === undefined) return undefined;
  const name = typeof v === 'string' ? v.trim() : null;
  if (name !== null && SERVICE_NAME.test(name)) return name;
  at('task.toml', field, "a compose service's name: letters, digits, _ . - (Harbor's own validator rejects it too, config.py:22-32)");
  return null;
}

/** `[[verifier.collect]]` (a task's or a step's): commands run after the agent, before artifacts are copied out (config.py:628-659). */
export function readCollect(value: unknown, at: Report, name = 'verifier.collect'): HarborCollect[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    at('task.toml', name, 'an array of tables ([[verifier.collect]] with command = "…")');
    return [];
  }
  const out: HarborCollect[] = [];
  value.forEach((hook, i) => {
    const field = `${name}[${i}]`;
    if (!isRecord(hook)) return at('task.toml', field, 'a table with command (and timeout_sec, user)');
    ignoreUnknown(hook, COLLECT_KEYS, field, 'VerifierCollectConfig', at);
    const command = typeof hook.command === 'string' && hook.command.trim() !== '' ? hook.command : null;
    if (command === null) at('task.toml', `${field}.command`, 'a shell command (required)');
    const timeout = hook.timeout_sec === undefined ? DEFAULT_COLLECT_TIMEOUT : seconds(hook.timeout_sec, `${field}.timeout_sec`, at);
    const user = stageUser(hook.user, `${field}.user`, at);
    const service = serviceName(hook.service, `${field}.service`, at);
    if (service === null || command === null || timeout === null) return;
    out.push({ command, timeoutSec: timeout, ...(user !== undefined ? { user } : {}), ...(service !== undefined ? { service } : {}) });
  });
  return out;
}

function stringList(v: unknown, field: string, at: Report): string[] | null {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    at('task.toml', field, 'a list of strings');
    return null;
  }
  return v as string[];
}

/**
 * What a separate verifier receives from the agent's environment, each at the same path: the
 * publish folder /logs/artifacts first (unless an entry names it), then every `artifacts` source
 * (artifacts.py:62-78, artifact_handler.py:189-233).
 */
export function carriedPaths(trial: Pick<HarborTrial, 'artifacts'>): HarborArtifact[] {
  const named = trial.artifacts.some((a) => a.source.replace(/\/+$/, '') === CONVENTION_ARTIFACTS);
  return named ? [...trial.artifacts] : [{ source: CONVENTION_ARTIFACTS, destination: null, exclude: [] }, ...trial.artifacts];
}

function readText(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}
