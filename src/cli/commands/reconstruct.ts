import chalk from 'chalk';
import type { Command } from 'commander';
import { writePrivateFile } from '../../core/private-file.js';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { emptyStats, reconstruct, type ReconstructStats } from '../../trajectory/reconstruct.js';
import { STRATEGIES, getStrategy } from '../../trajectory/registry.js';
import { loadTokenText } from '../../trajectory/tokenizer.js';
import { traceLines } from '../../trajectory/jsonl.js';
import { action } from '../output.js';
import { count } from '../plural.js';
import { INCLUDE_REPLAYS_HELP, replaysLeftOut, withoutReplays } from '../replay-sessions.js';
import { selectedSessions } from './export.js';

interface ReconstructCommandOptions {
  db?: string;
  session?: string[];
  strategy: string;
  out?: string;
  statsJson?: string;
  tokenizer?: string;
  includeSideCalls?: boolean;
  includeOffPolicy?: boolean;
  allowRerender?: boolean;
  rollout?: string;
  includeReplays?: boolean;
}

export function registerReconstruct(program: Command): void {
  program
    .command('reconstruct')
    .description('turn recorded sessions into trajectories (JSONL, one trace per line) for trainers')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--session <id...>', 'only these sessions (default: all)')
    .option('--rollout <id>', "only this rollout's samples (their final attempts)")
    .option('--strategy <name>', `${Object.keys(STRATEGIES).join(' | ')}`, 'prefix-merging')
    .option('--out <file>', 'write the JSONL here (default: stdout)')
    .option('--stats-json <file>', 'also write the summary as JSON')
    .option('--tokenizer <path>', 'tokenizer.json (or its folder): classify breaks and decode examples')
    .option('--allow-rerender', 'also join calls whose previous prompt is a prefix although the answer was re-rendered differently (counted as context drift)')
    .option('--include-side-calls', 'keep calls that offered no tools while their agent did elsewhere (titles, summaries)')
    .option('--include-replays', INCLUDE_REPLAYS_HELP)
    .option('--include-off-policy', "keep calls not sampled with the run's parameters as trainable (see polar export --help)")
    .addHelpText(
      'after',
      `
prefix-merging joins a session's calls into one trace per agent while each call's prompt starts with
every token of the trace so far (faithful: each token is what the model was conditioned on). A call
that does not extend its trace starts a new one; the break is counted by class: template, retoken,
rewrite (history changed: compaction, stripped earlier thinking) or other (no --tokenizer to tell).`,
    )
    .action(action(run));
}

async function run(opts: ReconstructCommandOptions): Promise<void> {
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  const strategy = getStrategy(opts.strategy, { allowRerender: opts.allowRerender === true });
  const stats = emptyStats(strategy.name);
  const out = traceLines(opts.out);
  let replays = 0;
  try {
    const text = opts.tokenizer ? loadTokenText(opts.tokenizer) : undefined;
    const picked = withoutReplays(store, selectedSessions(store, opts), opts.includeReplays === true);
    const sessions = picked.sessions;
    replays = picked.replays;
    for (const trace of reconstruct(
      store,
      {
        strategy,
        ...(sessions ? { sessions } : {}),
        ...(text ? { text } : {}),
        includeSideCalls: opts.includeSideCalls === true,
        includeOffPolicy: opts.includeOffPolicy === true,
      },
      stats,
    )) {
      await out.write(trace);
    }
  } finally {
    store.close();
    await out.close();
  }
  process.stderr.write(`${summary(stats)}\n`);
  if (replays > 0) process.stderr.write(`  ${replaysLeftOut(replays)}\n`);
  // 0600: break examples quote recorded text.
  if (opts.statsJson) writePrivateFile(opts.statsJson, `${JSON.stringify({ ...stats, replaySessionsLeftOut: replays }, null, 2)}\n`);
}

function summary(s: ReconstructStats): string {
  const saving = s.tokensPerRequest > 0 ? (1 - s.tokensMerged / s.tokensPerRequest) * 100 : 0;
  const breaks =
    Object.entries(s.breaks)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  const lines = [
    `${chalk.bold(s.strategy)}: ${count(s.sessions, 'session')}, ${count(s.calls, 'call')} (${s.used} used, ${s.excluded.length} excluded) → ${count(s.traces, 'trace')}, ${s.mergeRatio.toFixed(2)} calls per trace`,
    `  tokens: ${s.tokensPerRequest} per-request → ${s.tokensMerged} merged (${saving.toFixed(1)}% fewer)`,
    `  breaks: ${breaks}${s.contextDrift > 0 ? `; context drift: ${s.contextDrift} re-rendered boundaries joined (--allow-rerender)` : ''}`,
  ];
  const hint = breakHint(s);
  if (hint) lines.push(`  ${chalk.yellow('why')}: ${hint}`);
  for (const e of s.breakExamples.filter((x) => x.expected !== undefined)) {
    lines.push(`  ${e.class} at token ${e.position} of ${e.requestId}: had ${JSON.stringify(e.expected)}, found ${JSON.stringify(e.found)}`);
  }
  const p = s.prompts;
  if (p.bridged + p.full > 0) {
    const full = Object.entries(p.fullReasons)
      .map(([r, n]) => `${r} ${n}`)
      .join(', ');
    lines.push(
      `  prompts built by polar: ${p.bridged} bridged, ${p.full} full render${p.full === 1 ? '' : 's'}${full ? ` (${full})` : ''}${p.bridgedUnmerged.length > 0 ? chalk.yellow(`; ${p.bridgedUnmerged.length} bridged calls not merged onto their parent`) : ''}`,
    );
  }
  const reasons = new Map<string, number>();
  for (const e of s.excluded) reasons.set(e.reason, (reasons.get(e.reason) ?? 0) + 1);
  if (reasons.size > 0) lines.push(`  excluded: ${[...reasons].map(([r, n]) => `${r} ${n}`).join(', ')}`);
  return lines.join('\n');
}

/**
 * One line on why calls did not merge and what to do: the question a user has when a session of
 * many calls comes out as many traces.
 */
export function breakHint(s: ReconstructStats): string | null {
  const b = s.breaks;
  const total = b.template + b.retoken + b.rewrite + b.other;
  if (total === 0) return null;
  const polarRendered = s.prompts.bridged + s.prompts.full > 0;
  const calls = `${total} call${total === 1 ? '' : 's'} did not extend the trace before ${total === 1 ? 'it' : 'them'}`;
  if (b.other > 0) {
    return polarRendered
      ? `${calls}; pass --tokenizer PATH (the model's folder, or bundled:qwen3) to tell template, retoken and rewrite breaks apart`
      : `${calls}: the server rendered each prompt itself and re-rendered earlier replies differently from the ids it sampled. Pass --tokenizer PATH to classify the breaks; record with --upstream-kind vllm-tito (polar renders and bridges every turn) to merge whole sessions`;
  }
  if (b.template + b.retoken > 0 && !polarRendered) {
    return `${calls}: the server's chat template re-rendered earlier replies differently from the sampled ids (template ${b.template}, retoken ${b.retoken}); record with --upstream-kind vllm-tito so polar bridges every turn and whole sessions merge`;
  }
  if (b.rewrite === total)
    return `${calls}: the harness rewrote its history (compaction, edited or dropped turns), so a new trace starts there; nothing is lost`;
  return `${calls} (template ${b.template}, retoken ${b.retoken}, rewrite ${b.rewrite}); rewrites (compaction) always start a new trace, template and retoken breaks go away with --upstream-kind vllm-tito`;
}
