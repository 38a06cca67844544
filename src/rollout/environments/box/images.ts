import path from 'node:path';
import { DEFAULT_BUILD_TIMEOUT_SEC } from '../../harbor/toml-fields.js';
import type { SeparateVerifier } from '../../harbor/types.js';
import type { BoxSample } from './state.js';

/** The task's image, built from environment/ once per content under [environment].build_timeout_sec. */
export function taskImage(s: BoxSample): Promise<string> {
  const { trial } = s;
  return s.provider.image(
    { kind: 'build', name: trial.name, context: path.join(trial.dir, 'environment'), timeoutSec: trial.buildTimeoutSec ?? DEFAULT_BUILD_TIMEOUT_SEC },
    s.deps.onNotice,
  );
}

/** Harbor's separate verifier's image: its docker_image, else built from tests/ under its own build_timeout_sec. */
export function separateVerifierImage(s: BoxSample, v: SeparateVerifier): Promise<string> {
  if (v.image) return Promise.resolve(v.image);
  const source = { kind: 'build' as const, name: `${s.trial.name}-verifier`, context: v.context, timeoutSec: v.buildTimeoutSec ?? DEFAULT_BUILD_TIMEOUT_SEC };
  return s.provider.image(source, s.deps.onNotice);
}

/**
 * Before any sample's budget starts: the task's image (and a separate verifier's), built once per
 * process, each under its environment's build_timeout_sec.
 */
export async function provisionImages(s: BoxSample): Promise<void> {
  await taskImage(s);
  if (s.separate) await separateVerifierImage(s, s.separate);
}
