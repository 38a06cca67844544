import { existsSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { argv, describe, environment, mapping, text } from './fields.js';
import { interpolate, refusal } from './interpolate.js';
import { checkKeys, checkTopKeys, MAIN_KEYS, SIDECAR_KEYS } from './keys.js';
import { oneNetwork, serviceNetworks } from './networks.js';
import type { ComposePlan, ComposeService, MainOverrides } from './plan.js';
import { build, dependsOn, healthcheck } from './service-fields.js';

/** Harbor's own name for the agent's service (src/harbor/constants.py:26). */
export const MAIN_SERVICE = 'main';
/** Compose service names Harbor accepts (src/harbor/models/task/config.py:19-33). */
const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export interface ComposeOptions {
  /** The task's environment/ folder, absolute: the file's folder, where relative contexts start. */
  environmentDir: string;
  /** The variables compose interpolates with (interpolate.ts harborComposeVars). */
  vars: Readonly<Record<string, string>>;
}

interface Ctx extends ComposeOptions {
  notices: string[];
}

/** environment/docker-compose.yaml as a plan, or null when the task has none (Harbor's src/harbor/environments/docker/docker.py:228-230, 274-275). */
export function loadCompose(opts: ComposeOptions): ComposePlan | null {
  const file = path.join(opts.environmentDir, 'docker-compose.yaml');
  if (!existsSync(file)) return null;
  return parseCompose(readFileSync(file, 'utf8'), opts);
}

/** The file's text as a plan; everything polar cannot run is refused by name (a PolarError). */
export function parseCompose(source: string, opts: ComposeOptions): ComposePlan {
  // Compose files are YAML with anchors and `<<` merge keys (compose-spec "Fragments").
  const doc = parseDocument(source, { merge: true, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) throw refusal('YAML', doc.errors.map((e) => e.message).join('; '));
  const root = mapping(doc.toJS({ maxAliasCount: 1000 }));
  if (!root) throw refusal('top level', 'expected a mapping');
  checkTopKeys(root);
  const services = mapping(root.services);
  if (!services) throw refusal('services', `expected a mapping of services, got ${describe(root.services)}`);
  const ctx: Ctx = { ...opts, notices: [] };
  const sidecars: ComposeService[] = [];
  const used = new Map<string, string[]>();
  let main: MainOverrides = { dependsOn: [], env: {}, healthcheck: null, aliases: [] };
  used.set(MAIN_SERVICE, ['default']);
  for (const [name, raw] of Object.entries(services)) {
    if (!SERVICE_NAME.test(name))
      throw refusal(`service ${JSON.stringify(name)}`, 'not a compose service name (a letter or digit, then letters, digits, `_`, `.`, `-`)');
    const spec = raw === null ? {} : mapping(raw);
    if (!spec) throw refusal(`service ${name}`, `expected a mapping, got ${describe(raw)}`);
    const nets = serviceNetworks(spec.networks, `service ${name}: networks`);
    used.set(name, nets.names);
    if (name === MAIN_SERVICE) main = mainOverrides(spec, ctx, nets.aliases);
    else sidecars.push(sidecar(name, spec, ctx, nets.aliases));
  }
  const network = oneNetwork(used, interpolateTree(root.networks, opts.vars, 'networks'));
  checkDependencies(sidecars, main);
  return { services: sidecars, main, network, notices: ctx.notices };
}

/** Compose interpolates every string value of the file, never a key (compose-spec "Interpolation"). */
function interpolateTree(value: unknown, vars: Readonly<Record<string, string>>, where: string, at = ''): unknown {
  if (typeof value === 'string') return interpolate(value, vars, at ? `${where}: ${at}` : where);
  if (Array.isArray(value)) return value.map((v, i) => interpolateTree(v, vars, where, `${at}[${i}]`));
  const map = mapping(value);
  if (!map) return value;
  return Object.fromEntries(Object.entries(map).map(([k, v]) => [k, interpolateTree(v, vars, where, at ? `${at}.${k}` : k)]));
}

function sidecar(name: string, raw: Record<string, unknown>, ctx: Ctx, aliases: string[]): ComposeService {
  const where = `service ${name}`;
  checkKeys(raw, SIDECAR_KEYS, where, ctx.notices);
  const s = interpolateTree(raw, ctx.vars, where) as Record<string, unknown>;
  let image: ComposeService['image'];
  // With both, compose tags the build with `image` (Harbor builds first, src/harbor/environments/docker/docker.py:529-536).
  if (s.build !== undefined) image = build(s.build, ctx.environmentDir, `${where}: build`);
  else if (s.image !== undefined) image = { kind: 'ref', ref: text(s.image, `${where}: image`) };
  else throw refusal(where, 'neither `build` nor `image`: compose has nothing to run');
  return {
    name,
    image,
    env: s.environment === undefined ? {} : environment(s.environment, ctx.vars, `${where}: environment`),
    ...(s.command !== undefined && s.command !== null ? { command: argv(s.command, `${where}: command`) } : {}),
    ...(s.entrypoint !== undefined && s.entrypoint !== null ? { entrypoint: argv(s.entrypoint, `${where}: entrypoint`) } : {}),
    ...(s.working_dir !== undefined ? { workingDir: text(s.working_dir, `${where}: working_dir`) } : {}),
    ...(s.hostname !== undefined ? { hostname: text(s.hostname, `${where}: hostname`) } : {}),
    healthcheck: healthcheck(s.healthcheck, `${where}: healthcheck`),
    dependsOn: dependsOn(s.depends_on, `${where}: depends_on`),
    aliases,
  };
}

/** Harbor's keep-alive for main (src/harbor/environments/docker/docker-compose-build.yaml:6), which a file may restate. */
const KEEP_ALIVE = ['sh', '-c', 'sleep infinity'];

/**
 * The file's `main`, merged over Harbor's base (docker-compose-build.yaml, -prebuilt.yaml) as
 * compose merges a later file: its keys replace the base's (`command`) or add to them
 * (`environment`, `depends_on`). `build` may only restate the base's (environment/, its Dockerfile),
 * `image` only names that build, `deploy` only restates the resources polar applies itself.
 */
function mainOverrides(raw: Record<string, unknown>, ctx: Ctx, aliases: string[]): MainOverrides {
  const where = `service ${MAIN_SERVICE}`;
  checkKeys(raw, MAIN_KEYS, where, ctx.notices);
  const s = interpolateTree(raw, ctx.vars, where) as Record<string, unknown>;
  if (s.build !== undefined) {
    const b = build(s.build, ctx.environmentDir, `${where}: build`);
    if (b.kind !== 'build' || b.context !== realpathSync(ctx.environmentDir) || (b.dockerfile ?? 'Dockerfile') !== 'Dockerfile')
      throw refusal(`${where}: build`, "polar builds main from environment/Dockerfile (Harbor's base); another context or Dockerfile is not supported yet");
  }
  // In prebuilt mode main's `image` would replace the task's docker_image (src/harbor/environments/docker/docker-compose-prebuilt.yaml:3).
  if (s.image !== undefined && ctx.vars.PREBUILT_IMAGE_NAME !== undefined && s.image !== ctx.vars.PREBUILT_IMAGE_NAME)
    throw refusal(`${where}: image`, "polar runs main from task.toml's docker_image; another image is not supported yet");
  if (s.deploy !== undefined) mainDeploy(s.deploy, ctx);
  const command = s.command !== undefined && s.command !== null ? argv(s.command, `${where}: command`) : undefined;
  return {
    dependsOn: dependsOn(s.depends_on, `${where}: depends_on`),
    env: s.environment === undefined ? {} : environment(s.environment, ctx.vars, `${where}: environment`),
    ...(command && command.join('\0') !== KEEP_ALIVE.join('\0') ? { command } : {}),
    ...(s.entrypoint !== undefined && s.entrypoint !== null ? { entrypoint: argv(s.entrypoint, `${where}: entrypoint`) } : {}),
    ...(s.working_dir !== undefined ? { workingDir: text(s.working_dir, `${where}: working_dir`) } : {}),
    ...(s.user !== undefined ? { user: text(s.user, `${where}: user`) } : {}),
    healthcheck: healthcheck(s.healthcheck, `${where}: healthcheck`),
    aliases,
  };
}

/** main's `deploy.resources` (Harbor writes its own, src/harbor/environments/docker/__init__.py:23-53): polar applies [environment] cpus and memory_mb. */
function mainDeploy(value: unknown, ctx: Ctx): void {
  const where = `service ${MAIN_SERVICE}: deploy`;
  const deploy = mapping(value);
  const resources = deploy && Object.keys(deploy).every((k) => k === 'resources') ? mapping(deploy.resources ?? {}) : null;
  if (!resources) throw refusal(where, 'only `resources` (limits, reservations: cpus, memory) is supported by polar yet');
  for (const [kind, v] of Object.entries(resources)) {
    const lim = mapping(v);
    if ((kind !== 'limits' && kind !== 'reservations') || !lim || Object.keys(lim).some((k) => k !== 'cpus' && k !== 'memory'))
      throw refusal(`${where}.resources.${kind}`, 'only `limits` and `reservations` of `cpus` and `memory` are supported by polar yet');
    const same = (lim.cpus === undefined || String(lim.cpus) === ctx.vars.CPUS) && (lim.memory === undefined || String(lim.memory) === ctx.vars.MEMORY);
    if (!same)
      ctx.notices.push(`docker-compose.yaml: ${where}.resources.${kind} is not applied: polar gives main task.toml's [environment] cpus and memory_mb`);
  }
}

/** Each `depends_on` names a sidecar; main comes last (started by its caller), so none waits for it. */
function checkDependencies(sidecars: readonly ComposeService[], main: MainOverrides): void {
  const byName = new Map(sidecars.map((s) => [s.name, s]));
  for (const [who, deps] of [...sidecars.map((s) => [s.name, s.dependsOn] as const), [MAIN_SERVICE, main.dependsOn] as const]) {
    for (const d of deps) {
      const where = `service ${who}: depends_on`;
      if (d.service === MAIN_SERVICE) throw refusal(where, 'main: polar starts the agent’s box after every other service, so none can wait for it');
      const target = byName.get(d.service);
      if (!target) throw refusal(where, `${d.service}, which the file does not define`);
      if (d.condition === 'service_healthy' && !target.healthcheck)
        throw refusal(where, `${d.service} must be healthy, and it has no healthcheck here (polar does not read an image's own HEALTHCHECK)`);
      if (d.condition === 'service_completed_successfully' && !target.command)
        throw refusal(where, `${d.service} must complete, and it has no \`command\`: polar runs a one-shot service's command in its box`);
    }
  }
}
