import chalk from 'chalk';
import type { Command } from 'commander';
import { isPostgresUrl } from '../store/postgres/url.js';
import { readPasswordFile, urlPassword, withPassword } from '../store/postgres/password.js';

/** The options through which a command takes a PostgreSQL URL. */
const URL_OPTIONS = ['db', 'queue', 'to'] as const;

/**
 * `--db-password-file FILE` on every command that takes a database URL, and the rules for a password
 * on the command line (password.ts): added here once instead of in each command. Call after the
 * commands are registered.
 */
export function addDbPasswordOption(program: Command): void {
  const visit = (command: Command) => {
    const takesUrl = command.options.some((o) => URL_OPTIONS.some((name) => o.long === `--${name}`));
    if (takesUrl && !command.options.some((o) => o.long === '--db-password-file')) {
      command.option(
        '--db-password-file <file>',
        'the PostgreSQL password, read from this file (0600) instead of the URL: a password in --db shows in `ps`; PGPASSWORD and ~/.pgpass work too',
      );
    }
    command.commands.forEach(visit);
  };
  visit(program);
  program.hook('preAction', (_program, command) => applyDbPassword(command));
}

/**
 * Before a command runs: a password typed into a URL is warned about (once: the process's argv
 * already shows it); `--db-password-file` is read into each URL option that has no password, so
 * this process's client uses it (children get URLs without it: train.ts).
 */
export function applyDbPassword(command: Command, env: NodeJS.ProcessEnv = process.env): void {
  let warned = false;
  for (const name of URL_OPTIONS) {
    const value: unknown = command.getOptionValue(name);
    if (typeof value === 'string' && isPostgresUrl(value) && urlPassword(value) !== null && command.getOptionValueSource(name) === 'cli' && !warned) {
      warned = true;
      process.stderr.write(
        `${chalk.yellow('warning')}: the PostgreSQL password in --${name} is visible to every user of this machine (ps); use PGPASSWORD, ~/.pgpass or --db-password-file FILE\n`,
      );
    }
  }
  const file: unknown = command.getOptionValue('dbPasswordFile');
  if (typeof file !== 'string') return;
  const password = readPasswordFile(file);
  const db: unknown = command.getOptionValue('db');
  // --db left to $POLAR_DB: the file's password is for that URL too.
  if (db === undefined && env.POLAR_DB && isPostgresUrl(env.POLAR_DB) && command.options.some((o) => o.long === '--db'))
    command.setOptionValueWithSource('db', env.POLAR_DB, 'env');
  for (const name of URL_OPTIONS) {
    const value: unknown = command.getOptionValue(name);
    if (typeof value === 'string' && isPostgresUrl(value) && urlPassword(value) === null) {
      command.setOptionValueWithSource(name, withPassword(value, password), command.getOptionValueSource(name) ?? 'cli');
    }
  }
}
