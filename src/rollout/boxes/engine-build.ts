import { createHash } from 'node:crypto';
import { StageError } from '../stage-error.js';
import { buildArgs, contextHash, type Engine, imageTag, inspectImageArgs } from './engine-args.js';
import { runEngine } from './engine-run.js';
import type { ImageSource } from './types.js';

// One build attempt per image tag per process: the samples of a task wait on the same build, and a
// build that failed is that task's answer for every later sample too (trying it again per sample
// doubled the time a broken Dockerfile cost and printed its failure twice).
const builds = new Map<string, Promise<string>>();
const ONCE = 'polar tries each image once per process: start it again once the cause is fixed.';

/**
 * An image built from a build context once per content (tagged `polar-harbor/<name>:<hash>`;
 * `image inspect` finding it skips the build, so a later run, or another process, reuses it),
 * under the source's own budget (Harbor's build_timeout_sec, default 600: config.py:325, applied to
 * the environment's start apart from the agent's timeout, trial/trial.py:925-929 and :990-999).
 */
export function buildImage(engine: Engine, source: Extract<ImageSource, { kind: 'build' }>, onNotice: (line: string) => void): Promise<string> {
  const dockerfile = source.dockerfile ?? 'Dockerfile';
  const hash = contextHash(source.context);
  // The same context with another Dockerfile is another image.
  const named = createHash('sha256').update(`${hash}\0${dockerfile}`).digest('hex');
  const tag = imageTag(source.name, dockerfile === 'Dockerfile' ? hash : named);
  const key = `${engine}\0${tag}`;
  let build = builds.get(key);
  if (!build) {
    build = buildOnce(engine, tag, source, dockerfile, onNotice);
    // Every sample awaits it; this only keeps a failure no sample is waiting on yet from counting as unhandled.
    build.catch(() => {});
    builds.set(key, build);
  }
  return build;
}

async function buildOnce(
  engine: Engine,
  tag: string,
  source: Extract<ImageSource, { kind: 'build' }>,
  dockerfile: string,
  onNotice: (line: string) => void,
): Promise<string> {
  const { context, timeoutSec } = source;
  if ((await runEngine(engine, inspectImageArgs(tag))).code === 0) return tag;
  onNotice(`building ${tag} from ${context} with ${engine} (build_timeout_sec ${timeoutSec})`);
  const r = await runEngine(engine, buildArgs(tag, context, dockerfile), { timeoutMs: timeoutSec * 1000, termGraceMs: 10_000 });
  const output = (r.stdout + r.stderr).trim();
  if (r.timedOut)
    throw new StageError(
      'init',
      `${engine} build of ${context} did not finish within build_timeout_sec = ${timeoutSec} s (task.toml [environment]): raise it there, or build the image once beforehand with \`${engine} build -t ${tag} ${context}\` (polar reuses an image with that tag). ${ONCE}\n${output}`,
    );
  if (r.code !== 0) {
    // The engine says why last (a base image it cannot pull, a failing RUN): that goes first.
    const cause =
      output
        .split('\n')
        .filter((l) => l.trim())
        .pop() ?? '';
    throw new StageError(
      'init',
      `${engine} build of ${context} failed (exit ${r.code}): ${cause} (--environment host runs the task in polar's sandbox without its image). ${ONCE}\n${output}`,
    );
  }
  return tag;
}
