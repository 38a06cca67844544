import fs from 'node:fs';
import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import type { Db } from '../../store/db.js';
import { isPostgresUrl, redactUrl } from '../../store/postgres/url.js';
import { openStore } from '../../store/open.js';
import { action, printJson } from '../output.js';
import cliProgress from 'cli-progress';

export function registerDb(program: Command): void {
  const db = program.command('db').description('manage a database: migrate a shared PostgreSQL store, copy local captures into it');
  db.command('migrate')
    .description('bring a database (SQLite file or postgres://…) to the schema this polar writes')
    .requiredOption('--db <file|url>', 'SQLite file, or postgres://… for a shared store')
    .option('--json', 'print JSON')
    .action(action(migrate));
  db.command('copy')
    .description('copy a local polar database into a shared PostgreSQL store (idempotent: run it again to add what is new)')
    .requiredOption('--from <file>', 'the local SQLite database')
    .requiredOption('--to <url>', 'postgres://… of the shared store')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Rows are upserted by key, so copying twice changes nothing and an interrupted copy can simply be run again.
Example:
  polar db copy --from polar.db --to postgres://polar@db-host/polar
`,
    )
    .action(action(copy));
  db.command('ship')
    .description("ship what this machine's journal for a shared store still holds to PostgreSQL, and say what is left")
    .requiredOption('--db <url>', 'postgres://… of the shared store')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Every writer ships its journal (${'$'}POLAR_STATE_DIR/journal-….db) by itself; this is for a journal no
writer will open again: a machine that never comes back. Mount its state folder on a machine that is
there and ship it from that folder (crashed sessions in it are marked interrupted first):
  POLAR_STATE_DIR=/mnt/lost-host/.local/state/polar polar db ship --db postgres://polar@db-host/polar
Waits up to POLAR_SHIP_TIMEOUT_MS (default 60 s here) for PostgreSQL.
`,
    )
    .action(action(ship));
  db.command('set-aside')
    .description("rows of this machine's journal that PostgreSQL refused (a constraint, a missing column), kept here with the error")
    .requiredOption('--db <url>', 'postgres://… of the shared store')
    .option('--retry', 'ship them again (after fixing the cause); rows refused again stay set aside')
    .option('--limit <n>', 'rows to show', '5')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
A row PostgreSQL refuses for a reason of its own would block every row behind it, so the shipper sets
it aside in the journal (${'$'}POLAR_STATE_DIR/journal-….db) with PostgreSQL's error, and ships the rest.
Each machine keeps its own: run this on the machine that wrote them.
Example:
  polar db set-aside --db postgres://polar@db-host/polar
  polar db set-aside --db postgres://polar@db-host/polar --retry
`,
    )
    .action(action(setAside));
}

async function migrate(opts: { db: string; json?: boolean }): Promise<void> {
  if (isPostgresUrl(opts.db)) {
    const [{ Postgres }, { migratePostgres }] = await Promise.all([import('../../store/postgres/client.js'), import('../../store/postgres/schema.js')]);
    const pg = new Postgres(opts.db);
    try {
      const version = await migratePostgres(pg);
      // What this machine's journal holds back is part of the store's state as seen from here.
      const aside = (await localSetAside(opts.db, 0)).count;
      report(opts, { db: pg.label, schemaVersion: version, setAside: aside });
      if (aside > 0 && !opts.json)
        process.stdout.write(`${aside} ${aside === 1 ? 'row' : 'rows'} of this machine's journal PostgreSQL refused: polar db set-aside --db ${pg.label}\n`);
    } finally {
      await pg.close();
    }
    return;
  }
  const store = await openStore(opts.db);
  try {
    report(opts, { db: opts.db, schemaVersion: store.db.pragma('user_version', { simple: true }) as number });
  } finally {
    store.close();
  }
}

function report(opts: { json?: boolean }, out: { db: string; schemaVersion: number; setAside?: number }): void {
  if (opts.json) printJson({ ok: true, ...out });
  else process.stdout.write(`${out.db}: schema version ${out.schemaVersion}, up to date\n`);
}

async function ship(opts: { db: string; json?: boolean }): Promise<void> {
  if (!isPostgresUrl(opts.db))
    throw new PolarError('POLAR_USAGE', `--db must be a postgres:// URL: a local file has no journal (got ${JSON.stringify(opts.db)})`);
  const { journalPath } = await import('../../store/postgres/journal.js');
  const file = journalPath(opts.db);
  if (!fs.existsSync(file))
    throw new PolarError('POLAR_USAGE', `no journal for ${redactUrl(opts.db)} at ${file}: set POLAR_STATE_DIR to the state folder that holds it`);
  // Opened as a writer: crashed owners' sessions are reconciled, then the shipper runs.
  const store = await openStore(opts.db, { onNotice: (line) => process.stderr.write(`${line}\n`) });
  const waiting = () => store.db.prepare(`SELECT COUNT(*) FROM polar_outbox`).pluck().get() as number;
  const before = waiting();
  let left = before;
  try {
    await store.shipCommitted?.(Number(process.env.POLAR_SHIP_TIMEOUT_MS ?? 60_000)).catch((err: Error) => process.stderr.write(`${err.message}\n`));
    left = waiting();
  } finally {
    await store.closeAsync();
  }
  if (opts.json) printJson({ ok: left === 0, db: redactUrl(opts.db), journal: file, shipped: before - left, left });
  else process.stdout.write(`${redactUrl(opts.db)}: shipped ${before - left} rows of ${file}${left > 0 ? `; ${left} still wait (run it again)` : ''}\n`);
  if (left > 0) process.exitCode = 1;
}

async function copy(opts: { from: string; to: string; json?: boolean }): Promise<void> {
  if (isPostgresUrl(opts.from))
    throw new PolarError('POLAR_USAGE', '--from is a local SQLite file; to read a shared store, pass its URL as --db to any command');
  if (!isPostgresUrl(opts.to)) throw new PolarError('POLAR_USAGE', `--to must be a postgres:// URL (got ${JSON.stringify(opts.to)})`);
  const [{ Postgres }, { copyToPostgres }] = await Promise.all([import('../../store/postgres/client.js'), import('../../store/postgres/copy.js')]);
  const pg = new Postgres(opts.to);
  // Long copies show a bar per table on a terminal.
  const bar =
    opts.json || !process.stderr.isTTY
      ? null
      : new cliProgress.SingleBar(
          { stream: process.stderr, format: 'copying {table} [{bar}] {value}/{total}', hideCursor: false },
          cliProgress.Presets.shades_classic,
        );
  let current = '';
  try {
    const copied = await copyToPostgres(opts.from, pg, (p) => {
      if (!bar) return;
      if (p.table !== current) {
        if (current) bar.stop();
        current = p.table;
        bar.start(Math.max(1, p.total), p.copied, { table: p.table });
      } else bar.update(p.copied, { table: p.table });
    });
    bar?.stop();
    if (opts.json) printJson({ ok: true, from: opts.from, to: redactUrl(opts.to), copied });
    else
      process.stdout.write(
        `${chalk.bold('copied')} ${opts.from} → ${redactUrl(opts.to)}: ${Object.entries(copied)
          .map(([t, n]) => `${n} ${t}`)
          .join(', ')}\n`,
      );
  } finally {
    bar?.stop();
    await pg.close();
  }
}

async function setAside(opts: { db: string; retry?: boolean; limit: string; json?: boolean }): Promise<void> {
  if (!isPostgresUrl(opts.db))
    throw new PolarError('POLAR_USAGE', `--db must be a postgres:// URL: only a shared store's journal sets rows aside (got ${JSON.stringify(opts.db)})`);
  const [{ journalPath, requeueSetAside, setAsideRows }, { openDb, closeDb }] = await Promise.all([
    import('../../store/postgres/journal.js'),
    import('../../store/db.js'),
  ]);
  const file = journalPath(opts.db);
  const limit = Math.max(0, Number.parseInt(opts.limit, 10) || 0);
  const out: { ok: true; db: string; journal: string; retried?: number; count: number; rows: unknown[] } = {
    ok: true,
    db: redactUrl(opts.db),
    journal: file,
    count: 0,
    rows: [],
  };
  if (fs.existsSync(file)) {
    // reconcileOnly: the journal as it is (no migration, no owner registered), beside the processes using it.
    const db = openDb(file, { reconcileOnly: true });
    try {
      if (opts.retry) out.retried = await shipAgain(db, file, opts.db, requeueSetAside);
      const aside = setAsideRows(db, limit);
      out.count = aside.count;
      out.rows = aside.rows.map((r) => ({ ...r, at: new Date(r.at).toISOString() }));
    } finally {
      closeDb(db, { checkpoint: false });
    }
  }
  if (opts.json) {
    printJson(out);
    return;
  }
  const lines: string[] = [];
  if (out.retried !== undefined) lines.push(`shipped ${out.retried - out.count} of ${out.retried} set-aside rows again`);
  if (out.count === 0) lines.push(`${out.db}: no rows set aside in ${file}`);
  else {
    lines.push(
      `${out.db}: ${chalk.bold(String(out.count))} ${out.count === 1 ? 'row' : 'rows'} PostgreSQL refused ${out.count === 1 ? 'is' : 'are'} set aside in ${file}`,
    );
    for (const r of out.rows as { tbl: string; key: string; code: string | null; message: string; detail: string | null; at: string }[])
      lines.push(`  ${r.at}  ${r.tbl} ${r.key}: ${r.code ? `${r.code} ` : ''}${r.message}${r.detail ? ` (${r.detail})` : ''}`);
    if (out.count > out.rows.length) lines.push(`  … and ${out.count - out.rows.length} more (--limit, --json)`);
    lines.push(`Fix the cause in PostgreSQL, then ship them again: polar db set-aside --db ${out.db} --retry`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Puts the set-aside rows back in the outbox and ships what is committed; returns how many were put back. */
async function shipAgain(db: Db, file: string, url: string, requeue: (db: Db) => number): Promise<number> {
  const n = requeue(db);
  if (n === 0) return 0;
  const [{ Postgres }, { Shipper }] = await Promise.all([import('../../store/postgres/client.js'), import('../../store/postgres/ship.js')]);
  const origin = db.prepare(`SELECT value FROM polar_journal WHERE key = 'origin'`).pluck().get() as string;
  const pg = new Postgres(url);
  const shipper = new Shipper(file, pg, origin);
  try {
    const left = await shipper.shipCommitted(Number(process.env.POLAR_SHIP_TIMEOUT_MS ?? 10_000));
    if (left > 0) {
      const why = shipper.refusal ? `it refuses them: ${shipper.refusal.message}` : 'it could not be reached';
      process.stderr.write(`${left} rows wait in ${file} for PostgreSQL at ${pg.label} (${why}); the next polar process on this machine ships them\n`);
    }
  } finally {
    await shipper.stop();
    await pg.close();
  }
  return n;
}

/** The rows this machine's journal for `url` has set aside (none when no writer ran here). */
async function localSetAside(url: string, limit: number): Promise<{ count: number }> {
  const [{ journalPath, setAsideRows }, { openDb, closeDb }] = await Promise.all([import('../../store/postgres/journal.js'), import('../../store/db.js')]);
  const file = journalPath(url);
  if (!fs.existsSync(file)) return { count: 0 };
  const db = openDb(file, { reconcileOnly: true });
  try {
    return { count: setAsideRows(db, limit).count };
  } finally {
    closeDb(db, { checkpoint: false });
  }
}
