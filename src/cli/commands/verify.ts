import { readFile } from 'node:fs/promises';
import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { STRATEGIES, getStrategy } from '../../trajectory/registry.js';
import { loadTokenText } from '../../trajectory/tokenizer.js';
import type { SessionRow } from '../../store/sessions.js';
import type { TokenText, Trajectory } from '../../trajectory/types.js';
import type { Violation } from '../../trajectory/verify.js';
import { verifySessions, type VerifySummary } from '../../trajectory/verify-sessions.js';
import { action, printJson } from '../output.js';
import { count } from '../plural.js';
import { INCLUDE_REPLAYS_HELP, replaysLeftOut, withoutReplays } from '../replay-sessions.js';

interface VerifyCommandOptions {
  db?: string;
  session?: string[];
  strategy: string;
  traces?: string;
  allowRerender?: boolean;
  tokenizer?: string;
  json?: boolean;
  includeReplays?: boolean;
  includeOffPolicy?: boolean;
}

export function registerVerify(program: Command): void {
  program
    .command('verify-faithfulness')
    .description('prove every trainable token is exactly a sampled token: exits 0 only when every check holds')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--session <id...>', 'only these sessions (default: all)')
    .option('--strategy <name>', `strategy to reconstruct with: ${Object.keys(STRATEGIES).join(' | ')}`, 'prefix-merging')
    .option('--traces <file>', 'verify this trajectory JSONL (from polar reconstruct) instead of reconstructing')
    .option('--allow-rerender', "traces were built with --allow-rerender: do not require each call's context to be its recorded prompt")
    .option(
      '--tokenizer <path>',
      'tokenizer.json (or its folder): also check ids decode to the text the harness sent and received (token-in sessions use the tokenizer they recorded without it)',
    )
    .option('--include-replays', INCLUDE_REPLAYS_HELP)
    .option(
      '--include-off-policy',
      "the traces keep calls not sampled with the run's parameters (exported with --include-off-policy); such calls are reported as not on-policy either way",
    )
    .option('--json', 'print every violation as JSON')
    .action(action(verify));
}

async function verify(opts: VerifyCommandOptions): Promise<void> {
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  const summary: VerifySummary = { sessions: 0, calls: 0, traces: 0, violations: 0 };
  const violations: Violation[] = [];
  let replays = 0;
  try {
    const picked = withoutReplays(store, opts.session, opts.includeReplays === true);
    replays = picked.replays;
    const traces = opts.traces ? await readTraces(opts.traces) : undefined;
    const text = opts.tokenizer ? loadTokenText(opts.tokenizer) : undefined;
    const textFor = text ? undefined : recordedTokenizers(opts.json === true);
    for (const v of verifySessions(
      store,
      {
        strategy: getStrategy(opts.strategy, { allowRerender: opts.allowRerender === true }),
        ...(picked.sessions ? { sessions: picked.sessions } : {}),
        ...(traces ? { traces } : {}),
        ...(opts.includeOffPolicy ? { includeOffPolicy: true } : {}),
        ...(text ? { text } : {}),
        ...(textFor ? { textFor } : {}),
        allowRerender: opts.allowRerender === true,
      },
      summary,
    )) {
      violations.push(v);
      if (!opts.json && violations.length <= 50) process.stderr.write(`${chalk.red('violation')} ${describe(v)}\n`);
    }
  } finally {
    store.close();
  }
  if (opts.json) printJson({ ok: violations.length === 0, ...summary, replaySessionsLeftOut: replays, violations });
  else {
    if (replays > 0) process.stderr.write(`${replaysLeftOut(replays)}\n`);
    if (violations.length > 50) process.stderr.write(`… and ${violations.length - 50} more (--json lists all)\n`);
    const verdict = violations.length === 0 ? chalk.green('faithful') : chalk.red(count(violations.length, 'violation'));
    const decoded = summary.textChecked ? `; ids checked against their text in ${summary.textChecked} session${summary.textChecked === 1 ? '' : 's'}` : '';
    process.stderr.write(
      `${verdict}: ${count(summary.sessions, 'session')}, ${count(summary.calls, 'call')}, ${count(summary.traces, 'trace')} checked${decoded}\n`,
    );
  }
  process.exitCode = violations.length === 0 ? 0 : 1;
}

/**
 * The tokenizer each token-in session recorded (its `tokenizer` metadata), loaded once per path; a
 * path that is gone is said once, and those sessions are checked without it.
 */
function recordedTokenizers(quiet: boolean): (session: SessionRow) => TokenText | undefined {
  const loaded = new Map<string, TokenText | undefined>();
  return (session) => {
    const name = session.metadata.tokenizer;
    if (typeof name !== 'string') return undefined;
    if (!loaded.has(name)) {
      try {
        loaded.set(name, loadTokenText(name));
      } catch (err) {
        loaded.set(name, undefined);
        if (!quiet)
          process.stderr.write(
            `note: session ${session.id} recorded tokenizer ${name}, which cannot be loaded here (${(err as Error).message}); pass --tokenizer PATH to check its text\n`,
          );
      }
    }
    return loaded.get(name);
  };
}

function describe(v: Violation): string {
  const where = [
    `session ${v.session}`,
    v.traceIndex !== undefined ? `trace ${v.traceIndex}` : '',
    v.requestId ? `call ${v.requestId}` : '',
    v.position !== undefined ? `position ${v.position}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  return `[${v.check}] ${where}: ${v.message}`;
}

async function readTraces(file: string): Promise<Trajectory[]> {
  const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l.trim());
  return lines.map((line, i) => {
    try {
      return JSON.parse(line) as Trajectory;
    } catch (err) {
      throw new PolarError('POLAR_USAGE', `${file}:${i + 1} is not a JSON trajectory line`, undefined, { cause: err });
    }
  });
}
