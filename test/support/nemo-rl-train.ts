import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeGpuStandIns } from './fake-nemo-rl/stand-ins.js';
import { writeFixtureCheckout } from './nemo-rl-checkout.js';
import { patientSeconds } from './patience.js';

/**
 * The set-up the `polar train` tests share: a folder with the stand-in checkout and GPU stand-ins
 * (built by nemo-rl-checkout.ts and fake-nemo-rl/), the environment polar runs in there, a task
 * file, a one-call agent for the custom harness, a bare stand-in checkout for dry runs that never
 * read NeMo-RL's code, and the `train grpo` command line.
 */

export interface TrainBench {
  /** The test's own temporary folder; the test removes it. */
  dir: string;
  /** The stand-in NeMo-RL checkout, built from the pinned list (`RL` in dir). */
  checkout: string;
  /** uv and nvidia-smi stand-ins (`bin` in dir), for pathWithStandIns. */
  fakeBin: string;
}

/** A new temporary folder named `prefix…`, holding the stand-in checkout and the GPU stand-ins. */
export function makeTrainBench(prefix: string): TrainBench {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, checkout: writeFixtureCheckout(path.join(dir, 'RL')), fakeBin: writeGpuStandIns(dir) };
}

/** The environment `polar train` runs in: `base` without colours, the GPU stand-ins first on PATH, then `extra`. */
export function trainEnv(fakeBin: string, extra: NodeJS.ProcessEnv = {}, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...base, NO_COLOR: '1', PATH: pathWithStandIns(fakeBin), ...extra };
}

/** Tasks as a JSONL file, one task a line; returns the file. */
export function writeTaskFile(file: string, tasks: Record<string, unknown>[]): string {
  fs.writeFileSync(file, tasks.map((t) => JSON.stringify(t)).join('\n'));
  return file;
}

/**
 * Tasks `a` and `b`, "answer with 1" in an empty workspace, rewarded with answer.txt (what
 * writeOneCallAgent's agent writes with `"'1\\n'"`), a minute each on an idle machine (scaled by POLAR_TEST_PATIENCE); `extra` adds to every task.
 */
export function writeAnswerOneTasks(file: string, extra: Record<string, unknown> = {}): string {
  return writeTaskFile(
    file,
    ['a', 'b'].map((id) => ({
      id,
      prompt: 'answer with 1',
      workspace: { empty: true },
      evaluator: { type: 'command', command: 'cat answer.txt' },
      timeout: patientSeconds(60),
      ...extra,
    })),
  );
}

/**
 * A small real agent: one tool-bearing model call through polar (exit 3 if it is refused), then it
 * writes `answerJs` (a JavaScript expression, the prompt being `process.argv[2]`) to answer.txt.
 */
export function writeOneCallAgent(file: string, answerJs: string): string {
  fs.writeFileSync(
    file,
    `const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: process.argv[2] }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();
(await import('node:fs')).writeFileSync('answer.txt', ${answerJs});`,
  );
  return file;
}

/** A checkout with only the GRPO entry script and base config present: enough for a dry run to find it. */
export function writeBareCheckout(dir: string): string {
  for (const f of ['examples/nemo_gym/run_grpo_nemo_gym.py', 'examples/configs/grpo_math_1B.yaml']) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), '# stand-in\n');
  }
  return dir;
}

/** `PATH` with the GPU stand-ins (writeGpuStandIns) ahead of this process's own. */
export const pathWithStandIns = (fakeBin: string): string => `${fakeBin}${path.delimiter}${process.env.PATH}`;

export interface GrpoRun {
  checkout: string;
  model: string;
  tasks: string;
  /** `--harness …` and what it takes. */
  harness: string[];
  runDir: string;
  db: string;
  /**
   * The sandbox options, in place of the default `--sandbox none --allow-unsandboxed`; `[]` leaves
   * the choice to polar (bubblewrap).
   */
  sandbox?: string[];
  /** Further options, after the shared ones. */
  extra?: string[];
}

/**
 * `polar train grpo …` in the small shape every test uses: by default no sandbox (the one-call
 * agents' first prompt names no path, so --allow-unsandboxed), two prompts a step in groups of two.
 */
export function trainGrpoArgs(r: GrpoRun): string[] {
  return [
    'train',
    'grpo',
    '--nemo-rl',
    r.checkout,
    '--model',
    r.model,
    '--tasks',
    r.tasks,
    ...r.harness,
    ...(r.sandbox ?? ['--sandbox', 'none', '--allow-unsandboxed']),
    '--prompts-per-step',
    '2',
    '--group-size',
    '2',
    '--run-dir',
    r.runDir,
    '--db',
    r.db,
    ...(r.extra ?? []),
  ];
}
