import fs from 'node:fs';
import path from 'node:path';
import { isRecord } from '../../core/chat.js';
import { ignoreUnknown, type Report } from './toml-fields.js';
import type { HarborHealthcheck, HarborTrial } from './types.js';

/**
 * Harbor features that need the task's own container, read from task.toml and the Dockerfile: the
 * healthcheck and the image's ENTRYPOINT (its services). Line numbers are Harbor's source at the
 * fork snapshot 15735640198/harbor f276a3b (notes in /work/notes/harbor-features.md).
 */

/** HealthcheckConfig's fields and defaults (models/task/config.py:250-278). */
const HEALTHCHECK_KEYS = new Set(['command', 'interval_sec', 'timeout_sec', 'start_period_sec', 'start_interval_sec', 'retries']);

/** A `healthcheck` table ([environment.healthcheck], or a step's), each field checked; undefined when absent or wrong. */
export function readHealthcheck(value: unknown, field: string, at: Report): HarborHealthcheck | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) {
    at('task.toml', field, 'a table with at least `command`');
    return undefined;
  }
  let ok = true;
  const bad = (key: string, what: string) => {
    ok = false;
    at('task.toml', `${field}.${key}`, what);
  };
  ignoreUnknown(value, HEALTHCHECK_KEYS, field, 'HealthcheckConfig', at);
  if (typeof value.command !== 'string' || value.command.trim() === '') bad('command', 'a shell command (exit 0 means healthy)');
  const secs = (key: string, fallback: number, zero = false): number => {
    const v = value[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (!zero && v === 0)) {
      bad(key, zero ? 'seconds, 0 or more' : 'seconds, a positive number');
      return fallback;
    }
    return v;
  };
  const hc: HarborHealthcheck = {
    command: String(value.command ?? ''),
    intervalSec: secs('interval_sec', 5),
    timeoutSec: secs('timeout_sec', 30),
    startPeriodSec: secs('start_period_sec', 0, true),
    startIntervalSec: secs('start_interval_sec', 5),
    retries: 3,
  };
  if (value.retries !== undefined) {
    if (typeof value.retries !== 'number' || !Number.isInteger(value.retries) || value.retries < 1) bad('retries', 'a whole number, 1 or more');
    else hc.retries = value.retries;
  }
  return ok ? hc : undefined;
}

/**
 * The ENTRYPOINT the Dockerfile's last stage sets (null: none, or `ENTRYPOINT []`, which clears
 * it). Harbor keeps it: its compose file replaces only the CMD, with `sh -c "sleep infinity"`
 * (environments/docker/docker-compose-build.yaml:1-6), so whatever the ENTRYPOINT starts (a web
 * server, a database) runs beside the agent. An ENTRYPOINT inherited from the base image is not
 * seen here (the host does not reproduce the base image at all, and says so).
 */
export function dockerfileEntrypoint(dockerfile: string): { line: number; value: string } | null {
  let found: { line: number; value: string } | null = null;
  let joined = '';
  let start = 0;
  const lines = dockerfile.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (joined === '' && /^\s*#/.test(raw)) continue;
    if (joined === '') start = i + 1;
    if (/\\\s*$/.test(raw)) {
      joined += `${raw.replace(/\\\s*$/, '')} `;
      continue;
    }
    const instruction = (joined + raw).trim();
    joined = '';
    const m = /^(\w+)\s*(.*)$/s.exec(instruction);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (op === 'FROM') found = null;
    else if (op === 'ENTRYPOINT') found = rest === '' || /^\[\s*\]$/.test(rest) ? null : { line: start, value: rest };
  }
  return found;
}

/**
 * What of a task only a container runs: polar's host environment refuses the task, naming these
 * (the way out: --environment podman or docker). Empty: the host can run it.
 */
export function containerOnlyFeatures(trial: HarborTrial): string[] {
  const out: string[] = [];
  if (composeFile(trial.dir)) out.push("environment/docker-compose.yaml (the services Harbor runs beside the agent's container)");
  if (trial.healthcheck) out.push(`[environment.healthcheck] (${JSON.stringify(trial.healthcheck.command)}: a service in the task's image it waits for)`);
  if (trial.entrypoint) out.push(`the image's ENTRYPOINT ${trial.entrypoint} (processes Harbor runs beside the agent)`);
  for (const step of trial.steps ?? []) if (step.healthcheck) out.push(`step ${step.name}'s healthcheck (${JSON.stringify(step.healthcheck.command)})`);
  return out;
}

/** environment/docker-compose.yaml, where the task has one (Harbor's docker.py:228-230). */
export function composeFile(dir: string): string | null {
  const file = path.join(dir, 'environment', 'docker-compose.yaml');
  return fs.existsSync(file) ? file : null;
}

/** The host environment's refusal of a task that needs a container, with the way out; null: it can run there. */
export function hostRefusal(trial: HarborTrial): string | null {
  const needs = containerOnlyFeatures(trial);
  if (needs.length === 0) return null;
  return `task ${trial.name} needs a container engine: --environment podman (or docker). The host environment cannot run ${needs.join(' or ')}`;
}

/**
 * Users the host cannot apply: every command there runs as the sandbox's one user. Said once per
 * task before a run (the task still runs): [agent].user / [verifier].user (config.py:242-247,
 * :467-470), which Harbor applies with with_default_user (environments/base.py:340-350).
 */
export function hostUserNotice(trial: HarborTrial): string | null {
  const named = [
    ...(trial.agentUser !== undefined ? [`[agent].user = ${JSON.stringify(trial.agentUser)}`] : []),
    ...(trial.verifierUser !== undefined ? [`[verifier].user = ${JSON.stringify(trial.verifierUser)}`] : []),
  ];
  if (named.length === 0) return null;
  return `${named.join(' and ')} not applied: the host environment runs every command as this machine's user in its sandbox (--environment podman runs ${named.length === 1 ? 'it' : 'them'} as that user)`;
}

/** The container-only features of a task folder: task.toml's [environment.healthcheck] and the Dockerfile's ENTRYPOINT. */
export function readTaskFeatures(config: Record<string, unknown>, dir: string, at: Report): Pick<HarborTrial, 'healthcheck' | 'entrypoint'> {
  const environment = isRecord(config.environment) ? config.environment : {};
  const healthcheck = readHealthcheck(environment.healthcheck, 'environment.healthcheck', at);
  let dockerfile: string | null = null;
  try {
    dockerfile = fs.readFileSync(path.join(dir, 'environment', 'Dockerfile'), 'utf8');
  } catch {
    dockerfile = null;
  }
  const entrypoint = dockerfile === null ? null : dockerfileEntrypoint(dockerfile);
  return {
    ...(healthcheck ? { healthcheck } : {}),
    ...(entrypoint ? { entrypoint: `${entrypoint.value} (environment/Dockerfile line ${entrypoint.line})` } : {}),
  };
}
