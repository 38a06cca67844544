import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { defaultDbPath, type Store } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import type { ReadScope } from '../../store/open-options.js';
import { exportLines, type LeftOutKind } from '../../trajectory/export/select.js';
import { lookupResponse } from '../../proxy/recorded-response.js';
import { emptyStats } from '../../trajectory/reconstruct.js';
import { STRATEGIES, getStrategy } from '../../trajectory/registry.js';
import { numberArg } from '../numbers.js';
import { action, jsonLines, printJson } from '../output.js';
import { INCLUDE_REPLAYS_HELP } from '../replay-sessions.js';

interface ExportOptions {
  db?: string;
  session?: string[];
  format: 'tokens' | 'sft' | 'nemo-gym';
  strategy: string;
  minReward?: number;
  out?: string;
  allowRerender?: boolean;
  rollout?: string;
  accepted?: boolean;
  includePartial?: boolean;
  includeSideCalls?: boolean;
  includeOffPolicy?: boolean;
  includeReplays?: boolean;
  json?: boolean;
}

export function registerExport(program: Command): void {
  program
    .command('export')
    .description('write training data as JSONL: token trajectories for RL trainers, or chat examples for SFT')
    .addOption(
      new Option(
        '--format <format>',
        "tokens: trajectory records; sft: NeMo-RL openai_format {messages, tools}; nemo-gym: NeMo Gym rollouts.jsonl, one row per sample (its main agent's trace)",
      )
        .choices(['tokens', 'sft', 'nemo-gym'])
        .default('tokens'),
    )
    .option('--strategy <name>', Object.keys(STRATEGIES).join(' | '), 'prefix-merging')
    .option('--allow-rerender', 'prefix-merging with the looser rule (see polar reconstruct --help)')
    .option(
      '--min-reward <r>',
      'only traces with a reward of at least this (traces without a reward are left out)',
      numberArg('--min-reward', -Number.MAX_VALUE, Number.MAX_VALUE),
    )
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--session <id...>', 'only these sessions (default: all)')
    .option('--rollout <id>', "only this rollout's samples (their final attempts)")
    .option('--accepted', 'only samples a rollout accepted (--accept): offline SFT generation')
    .option('--include-partial', 'also traces of sessions that did not end on their own (timeout, interrupted, aborted)')
    .option('--include-side-calls', "also side calls (calls that offered no tools while the agent's others did: titles, summaries); not with --format nemo-gym")
    .option('--include-replays', INCLUDE_REPLAYS_HELP)
    .option(
      '--include-off-policy',
      "also train on calls not sampled with the run's parameters (a pass-through call that set its own sampling, guided decoding or chat template; a pair other than the rollout's): left out of the loss by default",
    )
    .option('--out <file>', 'write here (default: stdout)')
    .option('--json', 'with --out: print the summary (written, left out by kind and reason) as JSON')
    .action(action(exportData));
}

async function exportData(opts: ExportOptions): Promise<void> {
  if (opts.json && !opts.out) throw new PolarError('POLAR_USAGE', '--json needs --out FILE: without it the exported lines are what goes to stdout');
  // A Gym row is one sample's main trace; side calls are never part of it (as polar gym-agent answers).
  if (opts.includeSideCalls && opts.format === 'nemo-gym')
    throw new PolarError(
      'POLAR_USAGE',
      "--include-side-calls does not apply to --format nemo-gym: a Gym row is one sample's main trace, which side calls are not part of (--format tokens or sft keeps them)",
    );
  const minReward = opts.minReward ?? null;
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true, ...readScope(opts) });
  const out = jsonLines(opts.out);
  const lookup = (responseId: string, sessionId: string) => lookupResponse(store, responseId, sessionId);
  const leftOut = new Map<string, number>();
  const byKind = new Map<LeftOutKind, number>();
  const leave = (kind: LeftOutKind, reason: string) => {
    leftOut.set(reason, (leftOut.get(reason) ?? 0) + 1);
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
  };
  let written = 0;
  const stats = emptyStats(opts.strategy);
  try {
    const sessions = selectedSessions(store, opts);
    const strategy = getStrategy(opts.strategy, { allowRerender: opts.allowRerender === true });
    const selection = {
      format: opts.format,
      strategy,
      ...(sessions ? { sessions } : {}),
      minReward,
      accepted: opts.accepted === true,
      includePartial: opts.includePartial === true,
      includeSideCalls: opts.includeSideCalls === true,
      includeOffPolicy: opts.includeOffPolicy === true,
      includeReplays: opts.includeReplays === true,
      lookup,
    };
    for (const item of exportLines(store, selection, stats)) {
      if ('leftOut' in item) {
        leave(item.kind, item.leftOut);
        continue;
      }
      written++;
      await out.write(item.line);
    }
  } finally {
    store.close();
    await out.close();
  }
  const skipped = [...leftOut.values()].reduce((a, b) => a + b, 0);
  const kinds = [...byKind].map(([kind, n]) => `${n} ${n === 1 ? kind : plural(kind)}`).join(', ');
  process.stderr.write(`export ${opts.format}: ${written} written, ${skipped} left out${kinds ? `: ${kinds}` : ''}\n`);
  for (const [reason, n] of leftOut) process.stderr.write(`  left out ${n}: ${reason}\n`);
  if (opts.json && written > 0) {
    printJson({
      ok: true,
      format: opts.format,
      out: opts.out,
      written,
      leftOut: skipped,
      leftOutByKind: Object.fromEntries(byKind),
      leftOutByReason: Object.fromEntries(leftOut),
    });
  }
  if (written === 0) {
    const excluded = countReasons(stats.excluded.map((e) => e.reason));
    const why =
      skipped > 0
        ? 'everything was left out (reasons above)'
        : stats.calls === 0
          ? 'no recorded calls in the selected sessions'
          : `no call could be trained on (${[...excluded].map(([r, n]) => `${r}: ${n}`).join(', ')})`;
    throw new PolarError('POLAR_EMPTY_EXPORT', `nothing exported: ${why}; see \`polar reconstruct\` for the calls and traces`);
  }
}

/**
 * What an export of a shared store pulls from PostgreSQL: the rollout's or the sessions' rows only
 * (postgres/scoped.ts), not the whole store; with neither flag, everything (the mirror).
 */
export function readScope(opts: { session?: string[]; rollout?: string }): { scope?: ReadScope } {
  if (opts.rollout) return { scope: { rollouts: [opts.rollout] } };
  if (opts.session) return { scope: { sessions: opts.session } };
  return {};
}

/** --session, --rollout: the sessions to export (a rollout's: its samples' final attempts); undefined: all. */
export function selectedSessions(store: Store, opts: { session?: string[]; rollout?: string }): string[] | undefined {
  if (!opts.rollout) return opts.session;
  if (!store.rollouts.get(opts.rollout))
    throw new PolarError('POLAR_USAGE', `no rollout ${JSON.stringify(opts.rollout)} in this database; list them with \`polar rollouts\``);
  const ids = store.rollouts
    .samples(opts.rollout)
    .map((s) => s.sessionId)
    .filter((id): id is string => id !== null);
  return opts.session ? ids.filter((id) => opts.session!.includes(id)) : ids;
}

/** A left-out kind's plural: its noun is the first word ('side call' → 'side calls', 'call without token ids' → 'calls without token ids'). */
function plural(kind: LeftOutKind): string {
  if (kind === 'not accepted' || kind === 'below --min-reward') return kind;
  if (kind === 'call without token ids') return 'calls without token ids';
  return `${kind}s`;
}

function countReasons(reasons: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of reasons) out.set(r, (out.get(r) ?? 0) + 1);
  return out;
}
