import type { Command } from 'commander';
import chalk from 'chalk';
import { PolarError } from '../../core/errors.js';
import type { RequestSummary } from '../../store/requests.js';
import { loadSessionModel } from '../../inspect/session-model.js';
import { TokenPieces } from '../../inspect/token-strip.js';
import { defaultDbPath, type Store } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { loadTokenText } from '../../trajectory/tokenizer.js';
import { action, formatDuration, formatTime, printJson, table } from '../output.js';
import { count } from '../plural.js';

interface ShowOptions {
  db?: string;
  json?: boolean;
  plain?: boolean;
  tokenizer?: string;
}

export function registerShow(program: Command): void {
  program
    .command('show')
    .description(
      "one session's calls in order, grouped by the agent (sub-agent) that made them; on a terminal, a browser down to each call's tokens and the merged traces",
    )
    .argument('[session]', 'session id (see `polar sessions`); on a terminal, leave it out to pick one')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--tokenizer <path>', "decode tokens in the browser (the model's folder or tokenizer.json, or bundled:qwen3); without it tokens show as ids")
    .option('--plain', 'print the table even on a terminal')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
On a terminal (and without --json or --plain) polar show opens a browser: sessions → calls grouped by
agent → one call's tokens, prompt dimmed and sampled tokens coloured by their logprob → the session's
prefix-merged traces, each with the break that started it and its class. Keys are in its footer:
enter opens, esc goes back, / searches, q quits. Piped, it prints the table.

Examples:
  polar show --tokenizer bundled:qwen3          pick a session of the demo and read its tokens
  polar show ses_01kc… --plain                  the table`,
    )
    .action(action(showSession));
}

async function showSession(sessionId: string | undefined, opts: ShowOptions): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  if (!opts.json && !opts.plain && process.stdout.isTTY && process.stdin.isTTY) return browse(dbPath, sessionId, opts.tokenizer);
  if (sessionId === undefined)
    throw new PolarError('POLAR_USAGE', 'polar show needs a session id here (list them with `polar sessions`); on a terminal it opens a browser without one');
  if (opts.json) {
    const store = await openStore(dbPath, { readonly: true });
    try {
      const session = requireSession(store, sessionId);
      const calls = store.requests.list(sessionId);
      printJson({ ok: true, session, agents: agentsOf(calls), calls });
    } finally {
      store.close();
    }
    return;
  }
  await printSession(dbPath, sessionId);
}

async function browse(dbPath: string, sessionId: string | undefined, tokenizer: string | undefined): Promise<void> {
  const text = tokenizer ? loadTokenText(tokenizer) : undefined;
  const store = await openStore(dbPath, { readonly: true });
  try {
    if (sessionId !== undefined) requireSession(store, sessionId);
    const { browseSessions } = await import('../views/session-browser.js');
    await browseSessions(
      { sessions: () => store.sessions.list().reverse(), session: (id) => loadSessionModel(store, id, text), pieces: new TokenPieces(text) },
      sessionId,
    );
  } finally {
    store.close();
  }
}

/** A session as text: its summary, then its calls in order under each agent. */
export async function printSession(dbPath: string, sessionId: string): Promise<void> {
  const store = await openStore(dbPath, { readonly: true });
  try {
    const session = requireSession(store, sessionId);
    const calls = store.requests.list(sessionId);
    const harness = session.harness ? `  ${session.harness}${session.harnessVersion ? ` ${session.harnessVersion}` : ''}` : '';
    process.stdout.write(
      `session ${chalk.bold(session.id)}  ${session.status}${harness}  ${count(session.requests, 'call')}  ${session.promptTokens} prompt / ${count(session.sampledTokens, 'sampled token')}  created ${formatTime(session.createdAt)}\n`,
    );
    const prompts = promptCounts(calls);
    if (prompts) process.stdout.write(`prompts built by polar: ${prompts}\n`);
    for (const agent of agentsOf(calls)) {
      const mine = calls.filter((c) => c.agentId === agent.id);
      process.stdout.write(`\n${chalk.bold(`agent ${agent.id}`)}  ${count(agent.calls, 'call')}\n`);
      process.stdout.write(`${callTable(mine)}\n`);
    }
  } finally {
    store.close();
  }
}

/** Bridged / full-render counts and the reasons for full renders, for token-in and nemo-rl sessions. */
export function promptCounts(calls: readonly RequestSummary[]): string | null {
  const rendered = calls.filter((c) => c.render);
  if (rendered.length === 0) return null;
  const bridged = rendered.filter((c) => c.render!.mode === 'bridged').length;
  const reasons = new Map<string, number>();
  for (const c of rendered) if (c.render!.mode === 'full') reasons.set(c.render!.reason ?? 'unknown', (reasons.get(c.render!.reason ?? 'unknown') ?? 0) + 1);
  const full = rendered.length - bridged;
  return `${bridged} bridged, ${full} full render${full === 1 ? '' : 's'}${reasons.size > 0 ? ` (${[...reasons].map(([r, n]) => `${r} ${n}`).join(', ')})` : ''}`;
}

function requireSession(store: Store, sessionId: string) {
  const session = store.sessions.summary(sessionId);
  if (!session) {
    throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(sessionId)} in this database; list them with \`polar sessions\``);
  }
  return session;
}

/** Agents in order of their first call; `main` first when present. */
function agentsOf(calls: RequestSummary[]): { id: string; calls: number }[] {
  const order: string[] = [];
  const counts = new Map<string, number>();
  for (const c of calls) {
    if (!counts.has(c.agentId)) order.push(c.agentId);
    counts.set(c.agentId, (counts.get(c.agentId) ?? 0) + 1);
  }
  order.sort((a, b) => (a === 'main' ? -1 : b === 'main' ? 1 : 0));
  return order.map((id) => ({ id, calls: counts.get(id)! }));
}

/** `bridged #3` (onto call 3), `full: first-call`, or `-` where the server rendered the prompt. */
function renderCell(c: RequestSummary, calls: readonly RequestSummary[]): string {
  if (!c.render) return '-';
  if (c.render.mode === 'full') return `full: ${c.render.reason ?? '?'}`;
  const parent = calls.find((p) => p.id === c.render!.parentCallId);
  return `bridged ${parent ? `#${parent.seq}` : (c.render.parentCallId ?? '')}`;
}

function callTable(calls: RequestSummary[]): string {
  return table(
    ['#', 'API', 'STATUS', 'HTTP', 'STREAM', 'PROMPT', 'SAMPLED', 'FINISH', 'TIME', 'TOKENS', 'RENDER', 'NOTE'],
    calls.map((c) => [
      c.seq,
      c.provider,
      c.status,
      c.httpStatus ?? '-',
      c.streamed ? 'yes' : 'no',
      c.promptTokenCount ?? '-',
      c.sampledTokenCount ?? '-',
      c.finishReason ?? '-',
      formatDuration(c.endedAt === null ? null : c.endedAt - c.startedAt),
      c.tokenSource,
      renderCell(c, calls),
      (c.error ?? c.tokenError ?? '').slice(0, 80),
    ]),
  );
}
