import fs from 'node:fs';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import type { RolloutTask } from '../task-file.js';
import { folderEscapes, sourceEscape, within } from './copy-guard.js';
import { readDockerfile, type DockerCopy } from './dockerfile.js';
import { contextGlob, dockerIgnored, hasWildcard, ignoreProblem, readDockerignore } from './dockerignore.js';
import { readTaskFeatures } from './features.js';
import { hasSteps, readSteps, type StepDefaults } from './steps.js';
import { ignoreUnknown, network, readEnvironmentTable, type Report, seconds, stageUser, stringMap } from './toml-fields.js';
import { readTaskNeeds } from './task-needs.js';
import type { HarborAllowlist, HarborTrial } from './types.js';
import { readVerifierSetup, type VerifierSetup } from './verifier-config.js';
import { isDir, isFile, isLink } from '../../core/fs-kind.js';

/**
 * Harbor's defaults (config.py:465 verifier timeout) and the usual image working directory. Line
 * numbers here and in types.ts/trial.ts are Harbor's source at the fork snapshot
 * 15735640198/harbor f276a3b (harbor-framework/harbor itself could not be fetched here).
 */
const DEFAULT_VERIFIER_TIMEOUT = 600;
export const DEFAULT_WORKDIR = '/app';
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** [task].name: Harbor's ORG_NAME_PATTERN (constants.py:23), plus its "no '..'" (config.py:220). */
const ORG_NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]*\/[a-zA-Z0-9][a-zA-Z0-9._-]*$/;
// Harbor's top-level task.toml tables and keys (TaskConfig, config.py:698-723); pydantic ignores any other (no `extra` set), and so does polar, saying so.
const TOP_KEYS = new Set([
  'version',
  'schema_version',
  'task',
  'metadata',
  'verifier',
  'agent',
  'environment',
  'solution',
  'source',
  'steps',
  'artifacts',
  'multi_step_reward_strategy',
]);

/** Whether PATH is a Harbor task folder or a folder of them (a dataset), rather than a JSONL file. */
export function isHarborPath(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** A task folder polar cannot load, with every reason (file and field), as its folder names it. */
export interface InvalidHarborTask {
  /** The folder's name (a task's id). */
  id: string;
  dir: string;
  problems: string[];
}

/** A suite as loaded task by task: the tasks that load, and the ones that do not with their reasons. */
export interface HarborSuite {
  tasks: RolloutTask[];
  invalid: InvalidHarborTask[];
  /** PATH is one task folder (it holds task.toml), not a folder of them. */
  single: boolean;
}

/**
 * A Harbor task folder (it holds task.toml) or a dataset (its sub-folders that hold one), task by
 * task: one task's problems (each with its file and field) make that task invalid, not the suite,
 * as Harbor loads each task of a dataset on its own. A task polar cannot run (multi-step, no
 * Dockerfile) is invalid with its reason. Throws only when PATH holds no task at all.
 */
export function readHarborSuite(root: string): HarborSuite {
  const abs = path.resolve(root);
  const single = fs.existsSync(path.join(abs, 'task.toml'));
  const dirs = single
    ? [abs]
    : fs
        .readdirSync(abs, { withFileTypes: true })
        .filter((e) => e.isDirectory() && fs.existsSync(path.join(abs, e.name, 'task.toml')))
        .map((e) => path.join(abs, e.name))
        .sort();
  if (dirs.length === 0)
    throw new PolarError('POLAR_USAGE', `${root} is neither a Harbor task (no task.toml) nor a folder of them (no sub-folder holds a task.toml)`);
  const suite: HarborSuite = { tasks: [], invalid: [], single };
  const seen = new Map<string, string>();
  for (const dir of dirs) {
    const problems: string[] = [];
    const task = readHarborTask(dir, (file, field, what) =>
      problems.push(`${path.relative(process.cwd(), path.join(dir, file)) || file}${field ? `, field "${field}"` : ''}: ${what}`),
    );
    const first = task ? seen.get(task.id) : undefined;
    if (first) problems.push(`${path.relative(process.cwd(), dir)}: task id ${JSON.stringify(task!.id)} is also ${first}'s`);
    if (task && problems.length === 0) {
      seen.set(task.id, dir);
      suite.tasks.push(task);
    } else suite.invalid.push({ id: path.basename(dir), dir, problems });
  }
  return suite;
}

/** Every problem of every invalid task, as one usage error says them: "N problems; nothing was started:" and the list (bounded). */
export function invalidTasksText(invalid: readonly InvalidHarborTask[]): string {
  const problems = invalid.flatMap((t) => t.problems);
  const shown = problems.slice(0, 30);
  if (problems.length > shown.length) shown.push(`… and ${problems.length - shown.length} more`);
  return `${problems.length} problem${problems.length === 1 ? '' : 's'}; nothing was started:\n  ${shown.join('\n  ')}`;
}

/**
 * Every task of a Harbor folder or none: a usage error listing every problem of every task when
 * one is invalid. (`polar rollout --tasks` and `polar tasks check` take the valid tasks of a suite
 * instead: rollout/load-tasks.ts, readHarborSuite.)
 */
export function readHarborTasks(root: string): RolloutTask[] {
  const suite = readHarborSuite(root);
  if (suite.invalid.length > 0) throw new PolarError('POLAR_USAGE', `the Harbor tasks have ${invalidTasksText(suite.invalid)}`);
  return suite.tasks;
}

/** One task folder as a polar task, or null once every problem it has is reported. */
function readHarborTask(dir: string, report: Report): RolloutTask | null {
  let bad = false;
  const ignored: string[] = [];
  const allowlists: HarborAllowlist[] = [];
  const at: Report = Object.assign(
    (file: string, field: string | null, what: string) => {
      bad = true;
      report(file, field, what);
    },
    {
      ignored: (field: string, model: string) => ignored.push(`task.toml, field "${field}": ignored, as Harbor's ${model} ignores keys it does not define`),
      allowlist: (list: HarborAllowlist) => allowlists.push(list),
    },
  );
  const files = readTaskFiles(dir, at);
  if (!files.config) return null;
  const settings = readTaskSettings(files.config, dir, at);
  const context = path.join(dir, 'environment');
  const start = readStartingState(context, settings, at);
  const features = readTaskFeatures(files.config, dir, at);
  const multi = readSteps(files.config, dir, stepDefaults(settings, files.solutionDir), at, stripCanary);
  const needs = readTaskNeeds(isRecord(files.config.environment) ? files.config.environment : {}, at);
  if (bad || files.instruction === null) return null;
  // A multi-step task's prompt and first budget are its first step's (the later ones: stages.ts).
  const first = multi.steps?.[0];
  const task = toRolloutTask(first ? first.instruction : files.instruction, settings, {
    dir,
    name: settings.name,
    schemaVersion: settings.schemaVersion,
    workdir: start.workdir,
    copies: start.copies,
    ...(start.ignore.length > 0 ? { ignore: start.ignore } : {}),
    baseImage: start.baseImage,
    skipped: start.skipped,
    testsDir: files.testsDir,
    solutionDir: files.solutionDir,
    verifierTimeoutSec: settings.verifierTimeout,
    verifierEnv: settings.verifierEnv,
    solutionEnv: settings.solutionEnv,
    agentNetwork: settings.agentNetwork,
    verifierNetwork: settings.verifierNetwork,
    ...(settings.cpus !== undefined ? { cpus: settings.cpus } : {}),
    ...(settings.memoryBytes !== undefined ? { memoryBytes: settings.memoryBytes } : {}),
    buildTimeoutSec: settings.buildTimeoutSec,
    ...(settings.agentUser !== undefined ? { agentUser: settings.agentUser } : {}),
    ...(settings.verifierUser !== undefined ? { verifierUser: settings.verifierUser } : {}),
    verifierMode: settings.verifier.verifierMode,
    ...(settings.verifier.separateVerifier ? { separateVerifier: settings.verifier.separateVerifier } : {}),
    artifacts: settings.verifier.artifacts,
    collect: settings.verifier.collect,
    ...features,
    ...multi,
    ...needs,
    ...(allowlists.length > 0 ? { allowlists } : {}),
    ...(ignored.length > 0 ? { ignored } : {}),
  });
  return first ? { ...task, timeout: first.agentTimeoutSec } : task;
}

function stepDefaults(settings: TaskSettings, solutionDir: string | null): StepDefaults {
  const { agentTimeout, verifierTimeout, verifierEnv, agentUser, verifierUser } = settings;
  return {
    agentTimeoutSec: agentTimeout,
    verifierTimeoutSec: verifierTimeout,
    verifierEnv,
    solutionDir,
    verifierMode: settings.verifier.verifierMode,
    agentUser,
    verifierUser,
  };
}

interface TaskFiles {
  config: Record<string, unknown> | null;
  instruction: string | null;
  testsDir: string;
  solutionDir: string | null;
}

/** The folder's own files: task.toml, instruction.md, tests/test.sh and an optional solution/. */
function readTaskFiles(dir: string, at: Report): TaskFiles {
  const config = readToml(path.join(dir, 'task.toml'), at);
  const solution = isDir(path.join(dir, 'solution')) ? path.join(dir, 'solution') : null;
  // A multi-step task has its instructions and tests under steps/<name>/ (Harbor's
  // has_configured_steps, models/task/paths.py:191-197; task.py:73-74): steps.ts reads them.
  if (hasSteps(config)) return { config, instruction: '', testsDir: path.join(dir, 'tests'), solutionDir: solution };
  const instruction = readText(path.join(dir, 'instruction.md'));
  if (instruction === null) at('instruction.md', null, 'missing: what the agent is told');
  else if (stripCanary(instruction).trim() === '') at('instruction.md', null, 'empty');
  const testsDir = path.join(dir, 'tests');
  if (!isFile(path.join(testsDir, 'test.sh'))) at('tests/test.sh', null, 'missing: the verifier (Harbor runs `bash /tests/test.sh`)');
  return { config, instruction, testsDir, solutionDir: solution };
}

interface TaskSettings {
  id: string;
  name: string;
  schemaVersion: string;
  metadata: Record<string, unknown>;
  verifierTimeout: number;
  agentTimeout: number | null;
  verifierEnv: Record<string, string>;
  solutionEnv: Record<string, string>;
  agentNetwork: HarborTrial['agentNetwork'];
  verifierNetwork: HarborTrial['verifierNetwork'];
  /** [environment].workdir, which wins over the Dockerfile's WORKDIR. */
  workdirSetting: string | null;
  cpus: number | undefined;
  memoryBytes: number | undefined;
  dockerImage: string | null;
  /** [environment].build_timeout_sec (Harbor's default 600). */
  buildTimeoutSec: number;
  agentUser: string | undefined;
  verifierUser: string | undefined;
  /** Where the verifier runs and what reaches it from the agent's environment. */
  verifier: VerifierSetup;
}

/** task.toml's tables, each field checked (problems in the order the fields are read). */
function readTaskSettings(config: Record<string, unknown>, dir: string, at: Report): TaskSettings {
  ignoreUnknown(config, TOP_KEYS, '', 'TaskConfig', at);
  const schemaVersion = config.schema_version ?? config.version ?? '1.0';
  if (typeof schemaVersion !== 'string') at('task.toml', 'schema_version', 'a string such as "1.0" or "1.1"');
  const table = (key: string): Record<string, unknown> => {
    const v = config[key];
    if (v === undefined) return {};
    if (!isRecord(v)) {
      at('task.toml', key, 'a table');
      return {};
    }
    return v;
  };
  const taskTable = table('task');
  const metadata = table('metadata');
  const verifier = table('verifier');
  const agent = table('agent');
  const environment = table('environment');
  const solution = table('solution');
  let name = path.basename(dir);
  if (taskTable.name !== undefined) {
    if (typeof taskTable.name !== 'string' || !ORG_NAME.test(taskTable.name) || taskTable.name.includes('..'))
      at(
        'task.toml',
        'task.name',
        `${JSON.stringify(taskTable.name)} is not "org/name": Harbor's own validator rejects it too (letters, digits, . _ - on each side of one "/", no "..": PackageInfo.validate_name_format, models/task/config.py:216-224, ORG_NAME_PATTERN in constants.py:23)`,
      );
    else name = taskTable.name;
  }
  const id = path.basename(dir);
  if (!ID.test(id)) at('', null, `the folder's name is the task id: letters, digits, . _ - (up to 128), starting with a letter or digit`);
  const verifierTimeout = seconds(verifier.timeout_sec, 'verifier.timeout_sec', at) ?? DEFAULT_VERIFIER_TIMEOUT;
  const agentTimeout = seconds(agent.timeout_sec, 'agent.timeout_sec', at);
  const verifierEnv = stringMap(verifier.env, 'verifier.env', at);
  const solutionEnv = stringMap(solution.env, 'solution.env', at);
  const baseNetwork = network(environment, 'environment', at);
  const agentNetwork = network(agent, 'agent', at, true) ?? baseNetwork;
  const phaseNetwork = network(verifier, 'verifier', at, true);
  const environmentFields = readEnvironmentTable(environment, at);
  const setup = readVerifierSetup(config, verifier, { ...environmentFields, network: baseNetwork }, phaseNetwork, dir, at);
  // A separate verifier's network is its own environment's (config.py:480-491), not the agent's.
  const verifierNetwork = setup.separateVerifier ? setup.separateVerifier.network : (phaseNetwork ?? baseNetwork);
  return {
    id,
    name,
    schemaVersion: String(schemaVersion),
    metadata,
    verifierTimeout,
    agentTimeout,
    verifierEnv,
    solutionEnv,
    agentNetwork,
    verifierNetwork,
    agentUser: stageUser(agent.user, 'agent.user', at),
    verifierUser: stageUser(verifier.user, 'verifier.user', at),
    ...environmentFields,
    verifier: setup,
  };
}

interface StartingState {
  workdir: string;
  copies: HarborTrial['copies'];
  /** .dockerignore's patterns. */
  ignore: string[];
  baseImage: string | null;
  /** Dockerfile instructions the host environment does not run. */
  skipped: string[];
}

/** The starting state: what the Dockerfile copies from environment/ (its build context). */
function readStartingState(context: string, settings: TaskSettings, at: Report): StartingState {
  const { workdirSetting, dockerImage } = settings;
  const dockerfile = readText(path.join(context, 'Dockerfile'));
  const state: StartingState = { workdir: workdirSetting ?? DEFAULT_WORKDIR, copies: [], ignore: [], baseImage: dockerImage, skipped: [] };
  state.ignore = readDockerignore(readText(path.join(context, '.dockerignore')) ?? '');
  const badIgnore = ignoreProblem(state.ignore);
  if (badIgnore) at('environment/.dockerignore', null, badIgnore);
  if (dockerfile === null) {
    if (!dockerImage)
      at(
        'environment/Dockerfile',
        null,
        isFile(path.join(context, 'docker-compose.yaml'))
          ? 'a compose environment is not supported by polar yet: it needs environment/Dockerfile'
          : 'missing (or [environment].docker_image): the starting state',
      );
  } else {
    const plan = readDockerfile(dockerfile, workdirSetting ?? DEFAULT_WORKDIR);
    for (const p of plan.problems) at('environment/Dockerfile', `line ${p.line}`, p.what);
    state.workdir = workdirSetting ?? plan.workdir ?? DEFAULT_WORKDIR;
    state.baseImage = dockerImage ?? plan.baseImages.at(-1) ?? null;
    state.skipped.push(...plan.skipped);
    const folder = fs.realpathSync(path.dirname(context));
    const real = realOrNull(context);
    if (real !== null && !within(folder, real)) at('environment', null, `resolves outside the task folder (to ${real}, through a symlink)`);
    else for (const c of plan.copies) addCopy(context, c, state, at);
  }
  return state;
}

/** One COPY into the workspace: what it copies under WORKDIR (a COPY elsewhere is skipped). */
function addCopy(context: string, c: DockerCopy, state: StartingState, at: Report): void {
  const { workdir } = state;
  const inside = c.dest === workdir ? '' : c.dest.startsWith(`${workdir}/`) ? c.dest.slice(workdir.length + 1) : null;
  if (inside === null) {
    state.skipped.push(`COPY ${c.sources.join(' ')} ${c.dest}  (outside ${workdir})`);
    return;
  }
  const line = `line ${c.line}`;
  // The host copies with polar's own file access: a link out of environment/ would bring a host file.
  const kept = (abs: string, isDir: boolean) => {
    const rel = path.relative(context, abs).split(path.sep).join('/');
    return rel === '' || !dockerIgnored(rel, state.ignore, isDir);
  };
  for (const src of c.sources) {
    const from = path.resolve(context, src);
    if (from !== context && !from.startsWith(`${context}/`)) {
      at('environment/Dockerfile', line, `${src} is outside the build context`);
      continue;
    }
    const matches = hasWildcard(src) ? contextGlob(context, src) : fs.existsSync(from) || isLink(from) ? [from] : [];
    if (matches.length === 0) at('environment/Dockerfile', line, `${src}: no such file in environment/`);
    for (const m of matches) {
      const outside = sourceEscape(context, m);
      if (outside) {
        at('environment/Dockerfile', line, `${path.relative(context, m) || '.'} ${outside}: the host environment copies only what lies inside environment/`);
        continue;
      }
      const isFolder = isDir(m);
      if (isFolder && kept(m, true))
        for (const why of folderEscapes(context, m, kept))
          at('environment/Dockerfile', line, `${why}: the host environment copies only what lies inside environment/ (make it a relative link inside it)`);
      // A folder's contents go into the destination; a file goes to it, or into it when it is a folder.
      const to = isFolder ? inside : c.destIsDir || hasWildcard(src) ? path.posix.join(inside, path.basename(m)) : inside;
      if (!isFolder && to === '') at('environment/Dockerfile', line, `copies the file ${src} onto ${workdir} itself`);
      else state.copies.push({ from: m, to, dir: isFolder });
    }
  }
}

/** The polar task a Harbor task runs as: an empty workspace that the trial fills, graded by the verifier. */
function toRolloutTask(instruction: string, settings: TaskSettings, harbor: HarborTrial): RolloutTask {
  return {
    id: settings.id,
    prompt: stripCanary(instruction),
    workspace: { empty: true },
    setup: [],
    evaluator: { type: 'harbor', timeout: settings.verifierTimeout },
    timeout: settings.agentTimeout,
    metadata: settings.metadata,
    ...(settings.agentNetwork === 'public' ? { network: 'host' as const } : {}),
    harbor,
  };
}

function readToml(file: string, at: Report): Record<string, unknown> | null {
  const text = readText(file);
  if (text === null) {
    at('task.toml', null, 'missing');
    return null;
  }
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (err) {
    at('task.toml', null, `not valid TOML (${(err as Error).message.split('\n')[0]})`);
    return null;
  }
}

/** Leading canary lines (data-provenance markers) are not shown to agents, as Harbor does (task.py:12-31). */
export function stripCanary(text: string): string {
  const lines = text.split('\n');
  let i = 0;
  while (i < lines.length && /^(<!--.*canary.*-->|#.*canary.*)$/i.test(lines[i]!.trim())) i++;
  while (i < lines.length && lines[i]!.trim() === '') i++;
  return lines.slice(i).join('\n');
}

function readText(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function realOrNull(p: string): string | null {
  try {
    return fs.realpathSync(p);
  } catch {
    return null;
  }
}
