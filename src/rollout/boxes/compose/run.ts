import type { SandboxLimits } from '../../../sandbox/index.js';
import type { Box, BoxNetwork, BoxNetworks, BoxProvider } from '../types.js';
import { refusal } from './interpolate.js';
import { beforeMain, oneShotServices, startOrder } from './order.js';
import type { ComposePlan, ComposeService, DependsCondition } from './plan.js';
import { runOneShot, type SidecarSettings, sidecarSpec, waitHealthy } from './service-box.js';

export interface ServicesOptions {
  /** The sample's id, unique among running samples: the network's and each box's id derive from it. */
  id: string;
  /** The task's name, for the sidecars' image tags (`<task>-<service>`). */
  taskName: string;
  /** False when the task has no internet: the network is internal (the file's `internal: true` makes it so too). */
  internet: boolean;
  limits: SandboxLimits;
  cpus: number | null;
  /** Each sidecar build's budget (Harbor's build_timeout_sec). */
  buildTimeoutSec: number;
  /** A one-shot service's budget; 600 s when absent. */
  oneShotTimeoutSec?: number;
  onNotice: (line: string) => void;
}

/** The task's services, up: `main` joins `network` as `mainNetwork` says; `remove()` removes every box, then the network. */
export interface RunningServices {
  network: string;
  boxes: ReadonlyMap<string, Box>;
  /** The agent's box's network: this one, as `main` and main's aliases. */
  mainNetwork: BoxNetwork;
  remove(): Promise<void>;
}

/**
 * Starts a compose plan's sidecars as Harbor's `docker compose build` then `up --detach --wait`
 * do (src/harbor/environments/docker/docker.py:529-553): each image built once, one network, each service started once its
 * `depends_on` conditions hold, and returns once every healthcheck passed and main's own conditions
 * hold. On any failure, everything it made is removed before the error is thrown.
 */
export async function startServices(provider: BoxProvider, plan: ComposePlan, opts: ServicesOptions): Promise<RunningServices> {
  const networks = provider.networks;
  if (!networks)
    throw new Error(`the task's docker-compose.yaml needs its boxes on one network, and the ${provider.name} provider cannot make one (no BoxNetworks)`);
  const steps = startOrder(plan);
  const oneShots = oneShotServices(plan);
  for (const s of plan.services) {
    // A box's workdir is where its execs run (BoxSpec.workdir); its own process starts in the image's
    // WORKDIR, so only a one-shot service, whose command polar runs with `cd`, can honour this.
    if (s.workingDir !== undefined && !oneShots.has(s.name))
      throw refusal(
        `service ${s.name}`,
        '`working_dir` is not supported by polar yet on a long-running service (only on a one-shot service, which another waits for with service_completed_successfully)',
      );
  }
  for (const line of plan.notices) opts.onNotice(line);
  const images = await buildImages(provider, plan.services, opts);
  const network = await networks.create(opts.id, !opts.internet || plan.network.internal);
  const boxes = new Map<string, Box>();
  const remove = () => removeAll(boxes, networks, network);
  try {
    await startInOrder(provider, plan, steps, { images, network, boxes, opts });
  } catch (err) {
    await remove().catch(() => {});
    throw err;
  }
  return { network, boxes, mainNetwork: { kind: 'attach', network, aliases: ['main', ...plan.main.aliases] }, remove };
}

async function buildImages(provider: BoxProvider, services: readonly ComposeService[], opts: ServicesOptions): Promise<Map<string, string>> {
  const built = await Promise.allSettled(
    services.map((s) =>
      provider.image(s.image.kind === 'ref' ? s.image : { ...s.image, name: `${opts.taskName}-${s.name}`, timeoutSec: opts.buildTimeoutSec }, opts.onNotice),
    ),
  );
  const images = new Map<string, string>();
  built.forEach((r, i) => {
    const name = (services[i] as ComposeService).name;
    if (r.status === 'rejected') throw new Error(`compose service ${name}: its image: ${(r.reason as Error)?.message ?? r.reason}`, { cause: r.reason });
    images.set(name, r.value);
  });
  return images;
}

async function removeAll(boxes: Map<string, Box>, networks: BoxNetworks, network: string): Promise<void> {
  const results = await Promise.allSettled([...boxes.values()].map((b) => b.remove()));
  boxes.clear();
  // A network with boxes still on it is not removed (podman: "network is being used"), so boxes go first.
  results.push(...(await Promise.allSettled([networks.remove(network)])));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

interface StartState {
  images: ReadonlyMap<string, string>;
  network: string;
  boxes: Map<string, Box>;
  opts: ServicesOptions;
}

type Gates = Map<string, Record<DependsCondition, Promise<void>>>;

/** Every sidecar at once, each behind its conditions' gates; the first failure stops the rest at their next step. */
async function startInOrder(provider: BoxProvider, plan: ComposePlan, steps: ReturnType<typeof startOrder>, st: StartState): Promise<void> {
  const oneShots = oneShotServices(plan);
  const set: SidecarSettings = { id: st.opts.id, limits: st.opts.limits, cpus: st.opts.cpus, oneShotTimeoutSec: st.opts.oneShotTimeoutSec ?? 600 };
  const byName = new Map(plan.services.map((s) => [s.name, s]));
  const gates: Gates = new Map();
  const starts: Promise<Box>[] = [];
  let failure: unknown = null;
  const aborted = () => failure !== null;
  const fail = (err: unknown) => {
    failure ??= err;
    throw err;
  };
  for (const step of steps) {
    const s = byName.get(step.service) as ComposeService;
    const oneShot = oneShots.has(s.name);
    if (oneShot && s.entrypoint === undefined)
      st.opts.onNotice(`compose service ${s.name} runs its command once, without its image's ENTRYPOINT (give \`entrypoint\` to keep one)`);
    const started = Promise.all(step.waitFor.map((d) => gates.get(d.service)?.[d.condition]))
      .then(async () => {
        if (aborted()) throw new Error('another compose service failed');
        const box = await provider.start(await sidecarSpec(provider, s, st.images.get(s.name) as string, st.network, oneShot, set));
        st.boxes.set(s.name, box);
        return box;
      })
      .catch(fail);
    const check = (what: Promise<string | null>) => what.then((why) => (why === null ? undefined : fail(new Error(`compose service ${s.name}: ${why}`))));
    const healthy = started.then((box) => (s.healthcheck ? check(waitHealthy(box, s.healthcheck, aborted)) : undefined)).catch(fail);
    const up = started.then(() => {});
    const completed = oneShot ? started.then((box) => check(runOneShot(box, s, set))).catch(fail) : up;
    gates.set(s.name, { service_started: up, service_healthy: healthy, service_completed_successfully: completed });
    // Each is awaited below or by a dependent; a failure is thrown once, from `failure`.
    for (const p of [started, up, healthy, completed]) p.catch(() => {});
    starts.push(started);
  }
  const waits = [...gates.values()].map((g) => g.service_started);
  for (const d of beforeMain(plan)) waits.push(gates.get(d.service)?.[d.condition] ?? Promise.resolve());
  try {
    await Promise.all(waits);
  } catch (err) {
    // Every box a start still in flight makes is in `boxes` before the caller removes them.
    await Promise.allSettled(starts);
    throw failure ?? err;
  }
}
