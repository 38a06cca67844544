import type { Command } from 'commander';
import chalk from 'chalk';
import { PolarError } from '../../core/errors.js';
import type { RequestSummary } from '../../store/requests.js';
import { defaultDbPath, Store } from '../../store/store.js';
import { action, formatDuration, formatTime, printJson, table } from '../output.js';

interface ShowOptions {
  db?: string;
  json?: boolean;
}

export function registerShow(program: Command): void {
  program
    .command('show')
    .description("list one session's calls in order, grouped by the agent (sub-agent) that made them")
    .argument('<session>', 'session id (see `polar sessions`)')
    .option('--db <file>', 'SQLite database (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(showSession));
}

function showSession(sessionId: string, opts: ShowOptions): void {
  const dbPath = opts.db ?? defaultDbPath();
  if (opts.json) {
    const store = Store.open(dbPath, { readonly: true });
    try {
      const session = requireSession(store, sessionId);
      const calls = store.requests.list(sessionId);
      printJson({ ok: true, session, agents: agentsOf(calls), calls });
    } finally {
      store.close();
    }
    return;
  }
  printSession(dbPath, sessionId);
}

/** A session as text: its summary, then its calls in order under each agent. */
export function printSession(dbPath: string, sessionId: string): void {
  const store = Store.open(dbPath, { readonly: true });
  try {
    const session = requireSession(store, sessionId);
    const calls = store.requests.list(sessionId);
    const harness = session.harness ? `  ${session.harness}${session.harnessVersion ? ` ${session.harnessVersion}` : ''}` : '';
    process.stdout.write(
      `session ${chalk.bold(session.id)}  ${session.status}${harness}  ${session.requests} calls  ${session.promptTokens} prompt / ${session.sampledTokens} sampled tokens  created ${formatTime(session.createdAt)}\n`,
    );
    for (const agent of agentsOf(calls)) {
      const mine = calls.filter((c) => c.agentId === agent.id);
      process.stdout.write(`\n${chalk.bold(`agent ${agent.id}`)}  ${agent.calls} calls\n`);
      process.stdout.write(`${callTable(mine)}\n`);
    }
  } finally {
    store.close();
  }
}

function requireSession(store: Store, sessionId: string) {
  const session = store.sessions.summary(sessionId);
  if (!session) {
    throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(sessionId)} in this database; list them with \`polar sessions\``, 2);
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

function callTable(calls: RequestSummary[]): string {
  return table(
    ['#', 'API', 'STATUS', 'HTTP', 'STREAM', 'PROMPT', 'SAMPLED', 'FINISH', 'TIME', 'TOKENS', 'NOTE'],
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
      (c.error ?? c.tokenError ?? '').slice(0, 80),
    ]),
  );
}
