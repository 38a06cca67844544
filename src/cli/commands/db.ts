import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
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
}

async function migrate(opts: { db: string; json?: boolean }): Promise<void> {
  if (isPostgresUrl(opts.db)) {
    const [{ Postgres }, { migratePostgres }] = await Promise.all([import('../../store/postgres/client.js'), import('../../store/postgres/schema.js')]);
    const pg = new Postgres(opts.db);
    try {
      const version = await migratePostgres(pg);
      report(opts, { db: pg.label, schemaVersion: version });
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

function report(opts: { json?: boolean }, out: { db: string; schemaVersion: number }): void {
  if (opts.json) printJson({ ok: true, ...out });
  else process.stdout.write(`${out.db}: schema version ${out.schemaVersion}, up to date\n`);
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
