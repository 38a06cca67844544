import { describeSampling } from '../../upstream/sampling-policy.js';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { HARNESS_NAMES, getHarness } from '../../harness/registry.js';
import { runHarness, type RunHarnessResult } from '../../session/run-harness.js';
import { defaultDbPath } from '../../store/store.js';
import { displayDb } from '../../store/postgres/url.js';
import { callLine } from '../call-line.js';
import { integerArg, secondsArg } from '../numbers.js';
import { action, invokedAs, printJson } from '../output.js';
import { count } from '../plural.js';
import { RunStatusLine } from '../status-line.js';
import {
  addSamplingModeOption,
  addUpstreamOptions,
  captureSampling,
  UPSTREAM_KINDS_HELP,
  upstreamOptionsFrom,
  type UpstreamFlags,
} from '../upstream-options.js';
import { sandboxNotices } from '../../sandbox/index.js';
import { addSandboxOptions, settingsFrom, type SandboxFlags } from '../sandbox-options.js';

interface RunCommandOptions extends UpstreamFlags, SandboxFlags {
  harness: string;
  sampling?: string;
  upstream?: string;
  upstreamKind: string;
  proxy?: string;
  model?: string;
  prompt?: string;
  promptFile?: string;
  cwd?: string;
  timeout?: number;
  session?: string;
  db?: string;
  contextWindow?: number;
  harnessBin?: string;
  command?: string;
  node?: string;
  json?: boolean;
}

export function registerRun(program: Command): void {
  const command = program
    .command('run')
    .description('run a coding-agent harness with its model calls redirected through polar and recorded')
    .addOption(new Option('--harness <name>', 'the harness to run').choices([...HARNESS_NAMES]).makeOptionMandatory())
    .option('--upstream <url>', 'inference server base URL (a proxy is started for this run)');
  addSamplingModeOption(addUpstreamOptions(command))
    .option('--proxy <url>', 'use a running `polar proxy` instead of starting one')
    .option('--model <name>', "model to serve every call with (default: the upstream's first model)")
    .option('--prompt <text>', 'run headless with this task (without it: interactive)')
    .option('--prompt-file <file>', 'run headless with the task in this file')
    .option('--cwd <dir>', 'the workspace the harness works in (default: the current directory)')
    .option('--timeout <seconds>', 'end the harness (its whole process tree) after this long; the partial session is kept', secondsArg('--timeout'))
    .option('--session <name>', 'session id (default: a new one)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option(
      '--context-window <tokens>',
      "the served model's context length (default: the upstream's max_model_len)",
      integerArg('--context-window', 1, 100_000_000),
    )
    .option('--harness-bin <path>', 'the harness executable (default: node_modules/.bin, then PATH)')
    .option('--command <template>', "for --harness custom: e.g. 'mycli --base {base_url} {prompt}'")
    .option('--node <path>', 'a Node.js binary for JavaScript harnesses that need a newer one (Qwen Code needs 22)')
    .option('--json', 'print the result as JSON');
  addSandboxOptions(command, 'the harness (the working directory stays writable)')
    .argument('[harnessArgs...]', 'extra arguments for the harness, after --')
    .addHelpText(
      'after',
      `
Examples:
  polar run --harness claude-code --upstream http://gpu-box:8000/v1 --model Qwen/Qwen3-4B --prompt "fix the failing test"
  polar run --harness codex --upstream http://127.0.0.1:8000 --prompt-file task.md --timeout 1800
  polar run --harness custom --command 'mycli --base-url {base_url} --model {model} {prompt}' --upstream http://127.0.0.1:8000 --prompt hi
  polar run --harness pi --upstream http://127.0.0.1:8000 --upstream-kind vllm-tito --tokenizer ~/models/Qwen3-8B --prompt "add a test"
Output: polar names the folder the agent writes in as it starts; a headless run then prints one line
per model call (API, prompt → sampled tokens, how it ended, time, the tool call or text the model
answered with); the harness's own output, often a JSON event stream, goes to
.polar/runs/<session>/harness.log beside the database (its stderr is also shown).
--json prints only the result, as JSON.
Placeholders for --command: {base_url} (…/v1), {base_root}, {model}, {session}, {api_key}, {prompt}.
Sandbox (bwrap, the default where bubblewrap is installed): the harness writes only the working
directory and a private home, sees the system's toolchains read-only and not your home, the database
or the rest of the machine, and reaches only polar's proxy. --sandbox none runs it with your access.
${UPSTREAM_KINDS_HELP}`,
    )
    .action(action(runCommand));
}

async function runCommand(harnessArgs: string[], opts: RunCommandOptions): Promise<void> {
  if (opts.prompt !== undefined && opts.promptFile !== undefined) throw new PolarError('POLAR_USAGE', 'give --prompt or --prompt-file, not both');
  const prompt = opts.promptFile !== undefined ? await readFile(opts.promptFile, 'utf8') : (opts.prompt ?? null);
  const harness = getHarness(opts.harness, opts.command !== undefined ? { command: opts.command } : {});
  const timeoutSec = opts.timeout;
  const sandbox = settingsFrom(opts);
  // The harness runs with its permission prompts bypassed: say so when nothing contains it.
  if (!opts.sandbox && sandbox.kind === 'none') {
    process.stderr.write(
      chalk.yellow(
        'warning: bubblewrap is not installed or cannot make a sandbox here, so the harness runs unsandboxed: it can edit anything you can (Debian: apt-get install bubblewrap; or pass --sandbox none to say so)\n',
      ),
    );
  } else {
    for (const line of sandboxNotices(sandbox)) process.stderr.write(chalk.yellow(`notice: ${line}\n`));
  }
  if (opts.upstream && !opts.json) process.stderr.write(chalk.dim(`notice: ${describeSampling(captureSampling(opts))}\n`));
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  if (!opts.json) process.stderr.write(`polar run: ${writesIn(cwd, opts.cwd !== undefined, sandbox.kind !== 'none')}\n`);
  // Headless and not --json: a line per call on stdout, in place of the harness's own output (often
  // a raw JSON event stream), which goes to the log file only; its stderr is still shown.
  const callLines = prompt !== null && !opts.json;
  const statusLine = callLines && process.stderr.isTTY ? new RunStatusLine() : null;
  const printCall = (line: string) => (statusLine ? statusLine.printAbove(line) : process.stdout.write(`${line}\n`));
  let result: RunHarnessResult;
  try {
    result = await runHarness({
      harness,
      ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
      prompt,
      cwd,
      dbPath: opts.db ?? defaultDbPath(),
      ...(opts.upstream
        ? {
            upstream: {
              url: opts.upstream,
              kind: opts.upstreamKind,
              ...upstreamOptionsFrom(opts),
              ...(process.env.POLAR_UPSTREAM_API_KEY ? { apiKey: process.env.POLAR_UPSTREAM_API_KEY } : {}),
            },
          }
        : {}),
      ...(opts.upstream ? { sampling: captureSampling(opts) } : {}),
      ...(opts.proxy ? { proxyUrl: opts.proxy } : {}),
      ...(opts.model ? { model: opts.model } : {}),
      ...(opts.contextWindow ? { contextWindow: opts.contextWindow } : {}),
      ...(opts.session ? { session: opts.session } : {}),
      ...(timeoutSec ? { timeoutSec } : {}),
      ...(opts.node ? { nodeBin: opts.node } : {}),
      extraArgs: harnessArgs,
      sandbox: { settings: sandbox, network: sandbox.network },
      quiet: opts.json === true ? true : callLines ? 'stdout' : false,
      ...(callLines ? { onCallRecorded: (call) => printCall(callLine(call)) } : {}),
      onNotice: (line) => process.stderr.write(`${line}\n`),
      ...(statusLine ? { onCall: (s) => statusLine.call(s), onSessionSummary: (s) => statusLine.session(s) } : {}),
    });
  } finally {
    statusLine?.stop();
  }
  if (opts.json) printJson({ ok: result.exitCode === 0 && result.limit === null, ...result, cwd });
  else process.stderr.write(`${summaryLine(result, opts.db)}\n`);
  process.exitCode = result.limit ? result.exitCode || 1 : result.exitCode;
}

/**
 * The folder the agent writes in, said as the run starts (issue 40): a new user otherwise learns it
 * from the files that appear. The sandbox leaves it (and a private home) the only place it can write.
 */
export function writesIn(cwd: string, given: boolean, sandboxed: boolean): string {
  const why = given ? '--cwd' : 'the current folder; --cwd to choose another';
  return sandboxed ? `agent writes in ${cwd} (${why})` : `agent works in ${cwd} (${why}); unsandboxed, it can write anywhere you can`;
}

export function summaryLine(r: RunHarnessResult, dbPath?: string, options: { next?: boolean } = {}): string {
  const s = r.summary;
  const status = r.status === 'completed' ? chalk.green(r.status) : chalk.yellow(r.status);
  const counts = s
    ? `${count(s.requests, 'call')}, ${s.promptTokens} prompt / ${count(s.sampledTokens, 'sampled token')}, ${count(s.failed, 'error')}`
    : 'no calls';
  const db = dbPath && dbPath !== defaultDbPath() ? ` --db ${displayDb(dbPath)}` : '';
  const next = options.next === false ? '' : `\n  next: ${invokedAs()} show ${r.session}${db}`;
  const limit = r.limit ? chalk.red(`\n  ended by the sandbox: ${r.limit}`) : '';
  return `${chalk.bold('polar')} session ${r.session} ${status} (exit ${r.exitCode}): ${counts}${limit}\n  log ${r.logFile}${next}`;
}
