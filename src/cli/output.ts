import { once } from 'node:events';
import chalk from 'chalk';
import { PolarError } from '../core/errors.js';
import { lineOutput } from '../core/private-file.js';

export interface JsonOption {
  json?: boolean;
}

/**
 * Wraps a command action: a PolarError becomes `error[CODE]: message` (or the `--json` envelope
 * `{ok: false, error: {code, message}}`) and an exit code; nothing below the CLI prints or exits.
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void> | void): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      const opts = args.find((a): a is JsonOption => typeof a === 'object' && a !== null && 'json' in a);
      reportError(err, opts?.json === true);
    }
  };
}

export function reportError(err: unknown, json: boolean): void {
  const polar = err instanceof PolarError ? err : null;
  const code = polar?.code ?? 'POLAR_INTERNAL';
  const message = err instanceof Error ? err.message : String(err);
  if (json) {
    process.stdout.write(`${JSON.stringify({ ok: false, error: { code, message } })}\n`);
  } else {
    process.stderr.write(`${chalk.red(`error[${code}]`)}: ${message}\n`);
    if (!polar && err instanceof Error && err.stack) process.stderr.write(`${chalk.dim(err.stack)}\n`);
  }
  process.exitCode = exitCodeFor(err);
}

/**
 * Exit codes belong to the CLI, not to errors (a PolarError's status is the HTTP status a harness
 * would get): 2 for a command used wrongly (fix the flags and run it again), 1 for anything else.
 */
export function exitCodeFor(err: unknown): number {
  return err instanceof PolarError && err.code === 'POLAR_USAGE' ? 2 : 1;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A plain aligned table; numbers right-aligned. */
export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => String(c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const numeric = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  const line = (r: string[], head: boolean) =>
    r
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .map((c) => (head ? chalk.bold(c) : c))
      .join('  ')
      .trimEnd();
  return [line(cells[0]!, true), ...cells.slice(1).map((r) => line(r, false))].join('\n');
}

export function formatTime(ms: number | null): string {
  if (ms === null) return '-';
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  return `${Math.floor(ms / 60_000)}m${Math.round((ms % 60_000) / 1000)}s`;
}

/** JSON lines to a file (created 0600: it holds training data) or stdout, with backpressure. */
export function jsonLines(file: string | undefined): { write(value: unknown): Promise<void>; close(): Promise<void> } {
  const { out, end } = lineOutput(file);
  return {
    async write(value) {
      if (!out.write(`${JSON.stringify(value)}\n`)) await once(out, 'drain');
    },
    close: end,
  };
}

export { invokedAs } from './invoked-as.js';
