import { execFileSync } from 'node:child_process';
import { toolReason } from '../../core/process/failure.js';
import { StageError } from '../stage-error.js';
import { containerName, type Engine, networkCreateArgs, removeArgs, runArgs } from './engine-args.js';
import { openEngineBox } from './engine-box.js';
import { buildImage } from './engine-build.js';
import { runEngine } from './engine-run.js';
import type { BoxNetworks, BoxProvider, BoxSpec } from './types.js';

/**
 * docker and podman as one provider: their CLIs agree on every flag polar passes (engine-args.ts),
 * so the one difference is the program's name. A box is one container started with polar's
 * keep-alive; every stage `exec`s in it (engine-box.ts).
 */
export function engineProvider(engine: Engine): BoxProvider {
  return {
    name: engine,
    probe: () => probeEngine(engine),
    image: (source, onNotice) => (source.kind === 'ref' ? Promise.resolve(source.ref) : buildImage(engine, source, onNotice)),
    imageWorkdir: (image) => imageWorkdir(engine, image),
    start: (spec) => startBox(engine, spec),
    networks: engineNetworks(engine),
  };
}

/** null when `<engine> info` answers (a client without a daemon, or podman that cannot run containers, does not). */
function probeEngine(engine: Engine): string | null {
  try {
    execFileSync(engine, ['info'], { stdio: 'ignore', timeout: 15_000 });
    return null;
  } catch {
    return `\`${engine} info\` fails`;
  }
}

/** An image's WORKDIR (`/` when it sets none, or the engine cannot say). */
async function imageWorkdir(engine: Engine, image: string): Promise<string> {
  const r = await runEngine(engine, ['image', 'inspect', '--format', '{{.Config.WorkingDir}}', image]);
  const dir = r.code === 0 ? r.stdout.trim() : '';
  return dir.startsWith('/') ? dir : '/';
}

/** Starts the box and notes its own processes; removes it again if they cannot be read. */
async function startBox(engine: Engine, spec: BoxSpec) {
  const name = containerName(spec.id);
  const args = runArgs({
    name,
    image: spec.image,
    network: spec.network,
    mounts: spec.mounts,
    limits: spec.limits,
    cpus: spec.cpus,
    envNames: Object.keys(spec.env ?? {}),
    ...(spec.command ? { command: spec.command } : {}),
    ...(spec.entrypoint ? { entrypoint: spec.entrypoint } : {}),
    ...(spec.hostname ? { hostname: spec.hostname } : {}),
  });
  const started = await runEngine(engine, args, { env: { ...process.env, ...spec.env } });
  if (started.code !== 0) {
    await runEngine(engine, removeArgs(name));
    throw new StageError('init', cannotStart(engine, spec.image, args, toolReason(started.stderr)));
  }
  return openEngineBox(engine, spec, name);
}

/**
 * Why a container did not start, and what to try: the engine's own message first, then the command
 * polar ran (its flags are polar's: caps, mounts, network), then a plain start of the same image, which
 * tells an image or engine that cannot start anything from a flag of polar's this engine refuses.
 */
export function cannotStart(engine: Engine, image: string, args: readonly string[], reason: string): string {
  return [
    `${engine} could not start the sample's container from ${image}: ${reason || '(no message)'}.`,
    `polar ran: ${engine} ${args.join(' ')}.`,
    `Try \`${engine} run --rm ${image} true\`: if that fails too, the image or ${engine} itself cannot start containers here (fix that, or pass --environment host);`,
    `if it works, one of polar's flags above is what ${engine} refuses (--max-memory 0 and --max-procs 0 drop polar's caps; the mounts are polar's runtime and --sandbox-ro paths).`,
  ].join(' ');
}

/** Networks by name: compose services reach each other by service name (the engine's DNS on the network). */
function engineNetworks(engine: Engine): BoxNetworks {
  return {
    async create(id, internal) {
      const name = containerName(id);
      const r = await runEngine(engine, networkCreateArgs(engine, name, internal));
      if (r.code !== 0) throw new StageError('init', `${engine} could not create the network ${name}: ${toolReason(r.stderr) || `exit ${r.code}`}`);
      return name;
    },
    async remove(name) {
      // Boxes go first (a network with boxes on it is not removed); docker before 23 has no `-f`.
      await runEngine(engine, ['network', 'rm', name]);
    },
  };
}
