import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { HARNESS_NAMES, getHarness } from '../../harness/registry.js';
import { runHarness } from '../../session/run-harness.js';
import { startMockServer } from '../../mock-server/server.js';
import { DEMO_FILE } from '../../mock-server/script.js';
import { BUNDLED_QWEN3 } from '../../core/bundled-tokenizer.js';
import { defaultDbPath } from '../../store/store.js';
import { integerArg } from '../numbers.js';
import { action, invokedAs, printJson } from '../output.js';
import { demoRollout } from './demo-rollout.js';
import { summaryLine } from './run.js';
import { settingsFrom } from '../sandbox-options.js';
import { printSession } from './show.js';

interface DemoOptions {
  harness: string;
  upstreamKind: string;
  db?: string;
  node?: string;
  json?: boolean;
  rollout?: boolean;
  samples?: number;
  tasks?: string;
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('see polar work end to end, no GPU: a real harness runs a small task against the mock server, and polar shows what it captured')
    .addOption(new Option('--harness <name>', 'the harness to run').choices(HARNESS_NAMES.filter((h) => h !== 'custom')).default('claude-code'))
    .addOption(
      new Option(
        '--upstream-kind <kind>',
        'vllm: the mock renders prompts (as vLLM chat does); vllm-tito / sglang-tito: polar renders and bridges, with the bundled Qwen3 template',
      )
        .choices(['vllm', 'vllm-tito', 'sglang-tito'])
        .default('vllm'),
    )
    .option('--db <file>', 'where to record (default: $POLAR_DB, else ./polar.db — where `polar sessions` and `polar show` look next)')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--json', 'print the result as JSON')
    .option('--rollout', 'instead: the fixture tasks (fixtures/tasks) × 4 samples as a rollout, with rewards and GRPO advantages')
    .option('--samples <n>', 'with --rollout: samples per task', integerArg('--samples', 1, 64), 4)
    .option('--tasks <path>', 'with --rollout: other tasks with scripted mock solutions (metadata.mock), e.g. fixtures/harbor (Harbor task folders)')
    .action(action(demo));
}

async function demo(opts: DemoOptions): Promise<void> {
  if (opts.rollout) {
    await demoRollout(opts);
    return;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'polar-demo-'));
  const workspace = path.join(dir, 'workspace');
  await import('node:fs/promises').then((fs) => fs.mkdir(workspace));
  await writeFile(path.join(workspace, 'README.md'), '# demo project\n');
  await writeFile(path.join(workspace, 'main.py'), 'print("hello")\n');
  // The database later commands find by default, so `polar sessions` / `polar show` work next.
  const dbPath = opts.db ?? defaultDbPath();
  const sandbox = settingsFrom({});
  const mock = await startMockServer({ log: false });
  if (!opts.json)
    process.stderr.write(
      `${chalk.bold('polar demo')}: ${opts.harness} in ${workspace}, model calls to the mock server (scripted, not a model) at ${mock.url}\n`,
    );
  try {
    const result = await runHarness({
      harness: getHarness(opts.harness, {}),
      prompt: `List the files in this workspace with your shell tool, then create ${DEMO_FILE}, then say you are done.`,
      cwd: workspace,
      dbPath,
      upstream: { url: mock.url, kind: opts.upstreamKind, ...(opts.upstreamKind === 'vllm' ? {} : { tokenizer: BUNDLED_QWEN3 }) },
      timeoutSec: 300,
      quiet: true,
      ...(opts.node ? { nodeBin: opts.node } : {}),
      // As `polar run` does: sandboxed where bubblewrap is installed.
      sandbox: { settings: sandbox, network: sandbox.network },
      onNotice: (line) => process.stderr.write(`${line}\n`),
    });
    const file = path.join(workspace, DEMO_FILE);
    const wrote = existsSync(file) ? (await readFile(file, 'utf8')).trim() : null;
    if (opts.json) {
      printJson({ ok: result.exitCode === 0 && wrote !== null, ...result, db: dbPath, workspace, demoFile: wrote });
    } else {
      process.stdout.write('\n');
      await printSession(dbPath, result.session);
      process.stdout.write(`\n${summaryLine(result, dbPath, { next: false })}\n`);
      process.stdout.write(
        wrote !== null ? `the harness wrote ${DEMO_FILE}: "${wrote}"\n` : chalk.yellow(`the harness did not write ${DEMO_FILE}; see ${result.logFile}\n`),
      );
      process.stdout.write(
        `\nrecorded in ${dbPath}; next:\n${nextCommands(result.session, dbPath, opts.harness)
          .map((c) => `  ${c}`)
          .join('\n')}\n`,
      );
    }
    process.exitCode = result.exitCode === 0 && wrote !== null ? 0 : 1;
  } finally {
    await mock.close();
    // The demo's workspace is a temp folder: what the harness did is in the database and its log.
    await rm(dir, { recursive: true, force: true });
  }
}

/** The commands to try next, exactly as the user can paste them (with `npx` when that is how polar ran). */
export function nextCommands(session: string, dbPath: string, harness = 'claude-code'): string[] {
  const polar = invokedAs();
  const db = dbPath === defaultDbPath() ? '' : ` --db ${dbPath}`;
  return [
    `${polar} sessions${db}`,
    `${polar} show ${session}${db} --tokenizer bundled:qwen3`,
    `${polar} reconstruct --session ${session}${db} --out traces.jsonl`,
    `${polar} verify-faithfulness --session ${session}${db}`,
    `${polar} replay ${session}${db} --harness ${harness}`,
    `${polar} replay ${session}${db} --rescore --upstream mock --mock-policy-shift 4:0.5`,
    `${polar} report ${session}${db} --tokenizer bundled:qwen3 --out report.html`,
  ];
}
