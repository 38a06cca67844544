import type { Command } from 'commander';
import { openStore } from '../../store/open.js';
import { defaultDbPath } from '../../store/store.js';
import { integerArg } from '../numbers.js';
import { action, formatTime, printJson, table } from '../output.js';

interface AuditOptions {
  db?: string;
  session?: string;
  limit: number;
  json?: boolean;
}

export function registerAudit(program: Command): void {
  program
    .command('audit')
    .description("list calls a proxy with session keys refused (no key, a guessed one, another session's): they are in no session")
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--session <name>', 'only calls that named this session')
    .option('--limit <n>', 'the newest this many', integerArg('--limit', 1), 100)
    .option('--json', 'print JSON')
    .action(action(listAudit));
}

async function listAudit(opts: AuditOptions): Promise<void> {
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  try {
    const rows = store.audit.list({ limit: opts.limit, ...(opts.session !== undefined ? { session: opts.session } : {}) });
    if (opts.json) {
      printJson({ ok: true, refused: rows });
      return;
    }
    if (rows.length === 0) {
      process.stdout.write('no refused calls\n');
      return;
    }
    process.stdout.write(
      `${table(
        ['TIME', 'REASON', 'CLAIMED SESSION', 'METHOD', 'PATH', 'FROM'],
        rows.map((r) => [formatTime(r.at), r.reason, r.claimedSession ?? '-', r.method, r.path, r.remote ?? '-']),
      )}\n`,
    );
  } finally {
    store.close();
  }
}
