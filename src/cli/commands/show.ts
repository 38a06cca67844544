import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { defaultDbPath, Store } from '../../store/store.js';
import { action, formatDuration, formatTime, printJson, table } from '../output.js';

interface ShowOptions {
  db?: string;
  json?: boolean;
}

export function registerShow(program: Command): void {
  program
    .command('show')
    .description("list one session's calls in order")
    .argument('<session>', 'session id (see `polar sessions`)')
    .option('--db <file>', 'SQLite database (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(showSession));
}

function showSession(sessionId: string, opts: ShowOptions): void {
  const store = Store.open(opts.db ?? defaultDbPath(), { readonly: true });
  try {
    const session = store.sessions.summary(sessionId);
    if (!session) {
      throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(sessionId)} in this database; list them with \`polar sessions\``, 2);
    }
    const calls = store.requests.list(sessionId);
    if (opts.json) {
      printJson({ ok: true, session, calls });
      return;
    }
    process.stdout.write(
      `session ${session.id}  ${session.status}  ${session.requests} calls  ${session.promptTokens} prompt / ${session.sampledTokens} sampled tokens  created ${formatTime(session.createdAt)}\n`,
    );
    if (calls.length === 0) return;
    process.stdout.write(
      `${table(
        ['#', 'AGENT', 'API', 'STATUS', 'HTTP', 'STREAM', 'PROMPT', 'SAMPLED', 'FINISH', 'TIME', 'TOKENS', 'NOTE'],
        calls.map((c) => [
          c.seq,
          c.agentId,
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
      )}\n`,
    );
  } finally {
    store.close();
  }
}
