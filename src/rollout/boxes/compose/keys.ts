import { refusal } from './interpolate.js';

/**
 * The service keys polar runs (compose-spec "services" semantics, as Harbor's `docker compose up`
 * runs them, src/harbor/environments/docker/docker.py:553):
 * - `build` (path or {context, dockerfile}, inside environment/), `image` (used when no `build`);
 * - `environment` (list or map), `command`, `entrypoint` (string or list), `working_dir`, `hostname`;
 * - `healthcheck` (test CMD / CMD-SHELL / NONE / string, interval, timeout, start_period,
 *   start_interval, retries, disable), waited for before `main` starts, as `up --wait` waits;
 * - `depends_on` (list, or map with condition service_started / service_healthy /
 *   service_completed_successfully);
 * - `networks` (one network for all, with `aliases`).
 * On `main` also `user`, and `build`/`image`/`deploy` where they only restate Harbor's base.
 */
export const SIDECAR_KEYS = new Set([
  'build',
  'image',
  'environment',
  'command',
  'entrypoint',
  'working_dir',
  'hostname',
  'healthcheck',
  'depends_on',
  'networks',
]);
export const MAIN_KEYS = new Set([
  'build',
  'image',
  'deploy',
  'environment',
  'command',
  'entrypoint',
  'working_dir',
  'user',
  'healthcheck',
  'depends_on',
  'networks',
]);

/**
 * Keys that change nothing polar needs (`expose` only documents ports: boxes on one network reach
 * every port; `pull_policy`: polar builds what has `build`), or that it leaves out with a notice.
 */
const IGNORED: Readonly<Record<string, string | null>> = {
  expose: null,
  pull_policy: null,
  labels: null,
  tty: null,
  stdin_open: null,
  stop_signal: null,
  stop_grace_period: null,
  ports: 'its `ports` are not published on the host: main reaches it by name on their network',
  container_name: 'its `container_name` is not used: polar names each sample’s boxes itself',
  restart: 'its `restart` policy is not applied: a box that exits stays down',
};

/** Refuses every key polar does not run by name; notes those it leaves out. `x-*` extensions are compose's own comments. */
export function checkKeys(raw: Record<string, unknown>, supported: ReadonlySet<string>, where: string, notices: string[]): void {
  for (const key of Object.keys(raw)) {
    if (supported.has(key) || key.startsWith('x-')) continue;
    if (key in IGNORED) {
      const note = IGNORED[key];
      if (note && !(key === 'restart' && raw[key] === 'no')) notices.push(`docker-compose.yaml: ${where}: ${note}`);
      continue;
    }
    throw refusal(where, `\`${key}\` is not supported by polar yet`);
  }
}

/** Top-level keys: `services`, `networks`; `version` is obsolete and `name` yields to Harbor's --project-name (src/harbor/environments/docker/docker.py:385-386). */
export function checkTopKeys(root: Record<string, unknown>): void {
  for (const key of Object.keys(root)) {
    if (['services', 'networks', 'version', 'name'].includes(key) || key.startsWith('x-')) continue;
    throw refusal('top level', `\`${key}\` is not supported by polar yet`);
  }
}
