import fs from 'node:fs';
import path from 'node:path';

/**
 * The set-up the `polar train` tests share: a task file, a one-call agent for the custom harness, a
 * bare stand-in checkout for dry runs that never read NeMo-RL's code, and the `train grpo` command
 * line. The full stand-in checkout and GPU stand-ins are nemo-rl-checkout.ts and fake-nemo-rl/.
 */

/** Tasks as a JSONL file, one task a line; returns the file. */
export function writeTaskFile(file: string, tasks: Record<string, unknown>[]): string {
  fs.writeFileSync(file, tasks.map((t) => JSON.stringify(t)).join('\n'));
  return file;
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
  /** Further options, after the shared ones. */
  extra?: string[];
}

/**
 * `polar train grpo …` in the small shape every test uses: no sandbox (the one-call agents' first
 * prompt names no path, so --allow-unsandboxed), two prompts a step in groups of two.
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
    '--sandbox',
    'none',
    '--allow-unsandboxed',
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
