import { existsSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Healthcheck } from '../types.js';
import { argv, describe, durationSec, mapping, shellQuote, text } from './fields.js';
import { refusal } from './interpolate.js';
import type { ComposeImage, DependsCondition, DependsOn } from './plan.js';

/** Docker's HEALTHCHECK defaults (docker run --health-*: 30s, 30s, 0s, 5s, 3 retries), which compose keeps. */
const HEALTHCHECK_DEFAULTS = { intervalSec: 30, timeoutSec: 30, startPeriodSec: 0, startIntervalSec: 5, retries: 3 };
const HEALTHCHECK_KEYS = new Set(['test', 'interval', 'timeout', 'start_period', 'start_interval', 'retries', 'disable']);

/**
 * A service's `healthcheck` (compose-spec "healthcheck"): `test` as `[CMD, prog, args…]` (run
 * without a shell: polar `exec`s the quoted words under sh), `[CMD-SHELL, "cmd"]` or a plain string
 * (run by sh), `[NONE]` or `disable: true` (none). polar does not read an image's own HEALTHCHECK, so
 * a healthcheck without `test` is refused.
 */
export function healthcheck(value: unknown, where: string): Healthcheck | null {
  if (value === undefined || value === null) return null;
  const hc = mapping(value);
  if (!hc) throw refusal(where, `expected a mapping, got ${describe(value)}`);
  for (const key of Object.keys(hc)) if (!HEALTHCHECK_KEYS.has(key)) throw refusal(where, `\`${key}\` is not supported by polar yet`);
  if (hc.disable === true) return null;
  const command = testCommand(hc.test, `${where}.test`);
  if (command === null) return null;
  const dur = (key: string, fallback: number) => (hc[key] === undefined ? fallback : durationSec(hc[key], `${where}.${key}`));
  const retries = hc.retries === undefined ? HEALTHCHECK_DEFAULTS.retries : hc.retries;
  if (typeof retries !== 'number' || !Number.isInteger(retries) || retries < 1)
    throw refusal(`${where}.retries`, `expected a whole number of at least 1, got ${describe(retries)}`);
  return {
    command,
    intervalSec: dur('interval', HEALTHCHECK_DEFAULTS.intervalSec),
    timeoutSec: dur('timeout', HEALTHCHECK_DEFAULTS.timeoutSec),
    startPeriodSec: dur('start_period', HEALTHCHECK_DEFAULTS.startPeriodSec),
    startIntervalSec: dur('start_interval', HEALTHCHECK_DEFAULTS.startIntervalSec),
    retries,
  };
}

function testCommand(test: unknown, where: string): string | null {
  if (test === undefined) throw refusal(where, "no `test`: polar does not read an image's own HEALTHCHECK; give the command here");
  if (typeof test === 'string') return test;
  const words = argv(test, where);
  const [kind, ...rest] = words;
  if (kind === 'NONE') return null;
  if (kind === 'CMD' && rest.length > 0) return `exec ${shellQuote(rest)}`;
  if (kind === 'CMD-SHELL' && rest.length === 1) return rest[0] as string;
  throw refusal(where, `expected ["CMD", prog, args…], ["CMD-SHELL", "command"] or ["NONE"], got ${JSON.stringify(words)}`);
}

const CONDITIONS: readonly DependsCondition[] = ['service_started', 'service_healthy', 'service_completed_successfully'];

/** `depends_on`: a list of names (service_started) or a map of name → {condition, required, restart}. */
export function dependsOn(value: unknown, where: string): DependsOn[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.map((v, i) => ({ service: text(v, `${where}[${i}]`), condition: 'service_started' }));
  const map = mapping(value);
  if (!map) throw refusal(where, `expected a list or a mapping, got ${describe(value)}`);
  return Object.entries(map).map(([service, v]) => {
    const opts = v === null ? {} : mapping(v);
    if (!opts) throw refusal(`${where}.${service}`, `expected a mapping, got ${describe(v)}`);
    for (const key of Object.keys(opts)) {
      // `restart` restarts the dependent when the dependency is updated by compose: nothing polar does.
      if (key !== 'condition' && key !== 'required' && key !== 'restart') throw refusal(`${where}.${service}`, `\`${key}\` is not supported by polar yet`);
    }
    if (opts.required === false) throw refusal(`${where}.${service}`, '`required: false` is not supported by polar yet');
    const condition = opts.condition ?? 'service_started';
    if (!CONDITIONS.includes(condition as DependsCondition))
      throw refusal(`${where}.${service}.condition`, `expected one of ${CONDITIONS.join(', ')}, got ${describe(condition)}`);
    return { service, condition: condition as DependsCondition };
  });
}

/**
 * `build`: a context path or {context, dockerfile}. The context is relative to the compose file's
 * folder (environment/), as compose resolves it (src/harbor/environments/docker/docker.py:246-248), and must stay inside it: polar
 * builds only what the task ships.
 */
export function build(value: unknown, envDir: string, where: string): ComposeImage {
  const map = typeof value === 'string' ? { context: value } : mapping(value);
  if (!map) throw refusal(where, `expected a path or a mapping, got ${describe(value)}`);
  for (const key of Object.keys(map)) if (key !== 'context' && key !== 'dockerfile') throw refusal(`${where}`, `\`${key}\` is not supported by polar yet`);
  const given = map.context === undefined ? '.' : text(map.context, `${where}.context`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(given) || given.startsWith('git@'))
    throw refusal(`${where}.context`, `a remote context (${given}) is not supported by polar: the task must ship its build contexts`);
  const context = insideOrRefuse(path.resolve(envDir, given), envDir, `${where}.context`, given);
  if (!statSync(context).isDirectory()) throw refusal(`${where}.context`, `${given} is not a folder`);
  if (map.dockerfile === undefined) return { kind: 'build', context };
  const dockerfile = text(map.dockerfile, `${where}.dockerfile`);
  insideOrRefuse(path.resolve(context, dockerfile), context, `${where}.dockerfile`, dockerfile);
  return { kind: 'build', context, dockerfile: path.relative(context, path.resolve(context, dockerfile)) };
}

function insideOrRefuse(target: string, root: string, where: string, given: string): string {
  if (!existsSync(target)) throw refusal(where, `${given} does not exist (${target})`);
  const real = realpathSync(target);
  const realRoot = realpathSync(root);
  const rel = path.relative(realRoot, real);
  if (rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel))
    throw refusal(where, `${given} is outside ${root}: polar builds only from inside the task's folder`);
  return real;
}
