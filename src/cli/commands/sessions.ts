import type { Command } from 'commander';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { action, formatTime, printJson, table } from '../output.js';

interface SessionsOptions {
  db?: string;
  json?: boolean;
}

export function registerSessions(program: Command): void {
  program
    .command('sessions')
    .description('list recorded sessions with their call and token counts')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(listSessions));
}

async function listSessions(opts: SessionsOptions): Promise<void> {
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  try {
    const sessions = store.sessions.list();
    if (opts.json) {
      printJson({ ok: true, sessions });
      return;
    }
    if (sessions.length === 0) {
      process.stdout.write('no sessions yet: start `polar proxy --upstream URL` and point a harness at it\n');
      return;
    }
    process.stdout.write(
      `${table(
        ['SESSION', 'STATUS', 'HARNESS', 'CALLS', 'FAILED', 'PROMPT TOK', 'SAMPLED TOK', 'CREATED'],
        sessions.map((s) => [s.id, s.status, s.harness ?? '-', s.requests, s.failed, s.promptTokens, s.sampledTokens, formatTime(s.createdAt)]),
      )}\n`,
    );
  } finally {
    store.close();
  }
}
