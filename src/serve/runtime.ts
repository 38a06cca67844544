import { laxBool, laxFloat, laxInt } from './contract/polar-models.js';

/**
 * A TaskRequest's `runtime` (Polar's RuntimeSpec, src/polar/runtime/models.py:60-161) and its
 * `harbor` evaluator (trajectory/evaluator/harbor.py:54-139) as polar runs them: the image as a
 * Harbor task's environment, run by `polar serve --environment podman|docker` through the
 * box-provider layer (runtime-task.ts writes the task folder). Pure: what is accepted, with its
 * meaning, and what is refused by name.
 */
export interface ServedRuntime {
  image: string;
  /** The agent's working folder in the image (RuntimeSpec.workdir); null: the image's own WORKDIR. */
  workdir: string | null;
  env: Record<string, string>;
  /** prepare, in order: built into the sample's image, once, before any session (Polar runs them at each session's INIT). */
  prepare: PrepareStep[];
  allowInternet: boolean;
  cpus?: number;
  memoryMb?: number;
}

export type PrepareStep = { exec: string; cwd: string; env: Record<string, string> } | { upload: string; target: string };

/** The harbor evaluator's settings polar applies (harbor.py:54-85). */
export interface ServedHarbor {
  /** tests_dir: a folder on this machine (Polar: on the gateway host), given to the verifier at /tests. */
  testsDir: string;
  verifierTimeoutSec: number;
  env: Record<string, string>;
}

type Obj = Record<string, unknown>;
type Refuse = (loc: (string | number)[], msg: string) => void;
const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const strings = (v: unknown): Record<string, string> => Object.fromEntries(Object.entries(obj(v)).map(([k, x]) => [k, String(x)]));

/** Polar's default cwd for a prepare exec (gateway/node.py:432-495): the session folder. */
const SESSION_DIR = '/polar/session';
/** An environment variable's name, as a shell and a Dockerfile take one. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** An image reference's characters (name, tag, digest, registry and port). */
const IMAGE = /^[A-Za-z0-9][A-Za-z0-9._/:@-]*$/;
/** A path in the image: absolute, no control characters, no `$` (a Dockerfile would expand it). */
const IMAGE_PATH = /^\/[^\x00-\x1f\x7f$]*$/;
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

export function parseRuntime(runtime: Obj, refuse: Refuse, notices: string[]): ServedRuntime | null {
  const before = notices.length;
  let ok = true;
  const no = (loc: (string | number)[], msg: string) => {
    ok = false;
    refuse(['runtime', ...loc], msg);
  };
  const backend = String(runtime.backend ?? 'docker');
  if (backend !== 'docker') no(['backend'], `polar runs OCI images (podman or docker); an ${backend} image is not run: give its docker image`);
  if (runtime.direct_exec_init_command != null) no(['direct_exec_init_command'], "the image runs under polar's own init; drop it");
  if ((laxInt(runtime.gpus ?? 0) ?? 0) > 0) no(['gpus'], 'sessions get no GPU');
  if (Array.isArray(runtime.internet_volumes) && runtime.internet_volumes.length > 0)
    no(['internet_volumes'], "no host folder is mounted into a session's container");
  if (runtime.import_path != null) no(['import_path'], 'a Python runtime class cannot run in polar');
  for (const key of Object.keys(obj(runtime.kwargs)))
    no(
      ['kwargs', key],
      key === 'volumes'
        ? "no host folder is mounted into a session's container: build what it holds into the image"
        : `polar applies no runtime kwarg ${JSON.stringify(key)}`,
    );
  if (runtime.storage_mb != null) notices.push("runtime.storage_mb is not applied: a session's disk is not capped");
  if (runtime.network != null && runtime.network !== 'host')
    notices.push(
      `runtime.network ${JSON.stringify(runtime.network)} is not applied: the agent reaches the model through polar's proxy, and the internet as allow_internet says`,
    );
  if (runtime.eval_prepare != null) notices.push("runtime.eval_prepare is not run: polar's verifiers have no second runtime to prepare");
  // Every value lands in a Dockerfile line or a shell command: names as names, paths as paths, no line breaks.
  const image = String(runtime.image).trim();
  if (backend === 'docker' && !IMAGE.test(image)) no(['image'], 'an image reference (name[:tag][@digest]), no spaces or other characters');
  if (runtime.workdir != null && !IMAGE_PATH.test(String(runtime.workdir).trim()))
    no(['workdir'], 'an absolute path in the image, without $ or control characters');
  for (const [k, v] of Object.entries(obj(runtime.env))) {
    if (!ENV_NAME.test(k)) no(['env', k], 'a variable name: letters, digits and _, not starting with a digit');
    else if (CONTROL.test(String(v))) no(['env', k], 'a value without line breaks or control characters');
  }
  const prepare: PrepareStep[] = [];
  (Array.isArray(runtime.prepare) ? runtime.prepare : []).forEach((raw, i) => {
    const a = obj(raw);
    if (a.type === 'exec') {
      if ((laxInt(a.max_attempts ?? 1) ?? 1) > 1) notices.push(`runtime.prepare.${i}.max_attempts is not applied: it runs once, when the image is built`);
      if (a.cwd != null && !IMAGE_PATH.test(String(a.cwd))) no(['prepare', i, 'cwd'], 'an absolute path in the image, without $ or control characters');
      for (const k of Object.keys(obj(a.env))) if (!ENV_NAME.test(k)) no(['prepare', i, 'env', k], 'a variable name: letters, digits and _');
      prepare.push({ exec: String(a.command), cwd: a.cwd == null ? SESSION_DIR : String(a.cwd), env: strings(a.env) });
    } else {
      if (!IMAGE_PATH.test(String(a.target))) no(['prepare', i, 'target'], 'an absolute path in the image, without $ or control characters');
      prepare.push({ upload: String(a.source), target: String(a.target) });
    }
  });
  const cpus = runtime.cpus == null ? undefined : laxInt(runtime.cpus);
  const memoryMb = runtime.memory_mb == null ? undefined : laxInt(runtime.memory_mb);
  if (!ok) {
    notices.length = before;
    return null;
  }
  return {
    image,
    workdir: runtime.workdir == null ? null : String(runtime.workdir).trim(),
    env: strings(runtime.env),
    prepare,
    allowInternet: laxBool(runtime.allow_internet ?? true) ?? true,
    ...(cpus != null ? { cpus } : {}),
    ...(memoryMb != null ? { memoryMb } : {}),
  };
}

/** The harbor evaluator's config; only Polar's defaults for where things are in the image (tests at /tests, rewards in /logs/verifier, bash /tests/test.sh). */
export function parseHarborEvaluator(evaluator: Obj, refuse: Refuse, notices: string[]): ServedHarbor | null {
  const config = obj(evaluator.config);
  let ok = true;
  const no = (key: string, msg: string) => {
    ok = false;
    refuse(['evaluator', 'config', key], msg);
  };
  if (typeof config.tests_dir !== 'string' || config.tests_dir.trim() === '') no('tests_dir', "the folder of the task's tests (its test.sh), on this machine");
  const fixed: Record<string, string> = { tests_target: '/tests', verifier_dir: '/logs/verifier', test_command: 'bash /tests/test.sh' };
  for (const [key, value] of Object.entries(fixed))
    if (config[key] != null && String(config[key]) !== value) no(key, `polar's Harbor verifier uses ${value} (Harbor's own layout)`);
  if (laxBool(config.emit_cost_reward ?? false)) no('emit_cost_reward', "the reward is the verifier's alone; a cost reward is not added");
  for (const key of ['upload_attempts', 'upload_retry_backoff_seconds'])
    if (config[key] != null) notices.push(`evaluator.config.${key} is not needed: the tests are mounted, not uploaded`);
  if (laxBool(evaluator.refresh_runtime ?? false))
    notices.push("evaluator.refresh_runtime: the harbor evaluator grades the session's own container, as Polar's does");
  const known = new Set(['tests_dir', 'verifier_timeout', 'emit_cost_reward', 'upload_attempts', 'upload_retry_backoff_seconds', ...Object.keys(fixed)]);
  for (const key of Object.keys(config)) if (!known.has(key)) no(key, `the harbor evaluator takes no setting ${JSON.stringify(key)}`);
  // Harbor fills ${VAR} in a verifier's env from the serving machine's own (harbor/env.ts): a request may not name polar serve's secrets.
  for (const [k, v] of Object.entries(obj(evaluator.env))) {
    if (!ENV_NAME.test(k)) {
      ok = false;
      refuse(['evaluator', 'env', k], 'a variable name: letters, digits and _');
    } else if (String(v).includes('${') || CONTROL.test(String(v))) {
      ok = false;
      refuse(['evaluator', 'env', k], "a literal value: ${…} would be filled in from polar serve's own environment");
    }
  }
  const timeout = config.verifier_timeout == null ? 120 : laxFloat(config.verifier_timeout);
  if (timeout == null || !(timeout > 0)) no('verifier_timeout', 'seconds, above 0');
  if (!ok) return null;
  return { testsDir: String(config.tests_dir), verifierTimeoutSec: timeout!, env: strings(evaluator.env) };
}
