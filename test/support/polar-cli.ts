import { type ChildProcess, execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { onTestFinished } from 'vitest';
import { endChild } from './end-child.js';

/** The built CLI (`npm run build` first: it runs dist/). */
export const POLAR_BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);

export interface PolarCliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface PolarCliOptions {
  /** The child's whole environment; default this process's, with NO_COLOR. */
  env?: NodeJS.ProcessEnv;
  /** Milliseconds before the child is killed; default none. */
  timeout?: number;
  /** Bytes of output kept before the child is killed; default execFile's 1 MiB. */
  maxBuffer?: number;
}

/**
 * `polar ARGS` as a child process, resolving (never rejecting) with its exit code and output, so a
 * test can assert on a failing command as on a passing one. A child that did not exit by itself
 * carries what execFile's error held (null when killed, a string code when it could not start), so
 * no such run reads as a real exit status.
 */
export async function polarCli(args: string[], opts: PolarCliOptions = {}): Promise<PolarCliResult> {
  try {
    // Unset options stay unset: execFile reads an undefined maxBuffer as no limit, not its default.
    const running = run(process.execPath, [POLAR_BIN, ...args], {
      env: opts.env ?? { ...process.env, NO_COLOR: '1' },
      ...(opts.timeout === undefined ? {} : { timeout: opts.timeout }),
      ...(opts.maxBuffer === undefined ? {} : { maxBuffer: opts.maxBuffer }),
    });
    endWithTest(running.child);
    const { stdout, stderr } = await running;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/**
 * A test that ends (passed, failed, or past its timeout: vitest does not stop its function) ends the
 * polar it started and waits for it, so nothing writes into the folder the file's afterAll removes.
 * Called from a hook there is no test to follow: the hook's own cleanup is in charge.
 */
function endWithTest(child: ChildProcess): void {
  try {
    onTestFinished(() => endChild(child));
  } catch {
    // not inside a test
  }
}

/** `--harness custom --command` running a Node script as the agent, the prompt its one argument. */
export function nodeAgentHarness(script: string): string[] {
  return ['--harness', 'custom', '--command', `${process.execPath} ${script} {prompt}`];
}

/** `polar export --db DB --session SESSION ARGS`: its stdout's JSON lines, stderr and exit code. */
export async function polarExportSession(db: string, session: string, args: string[]): Promise<{ lines: Record<string, any>[]; stderr: string; code: number }> {
  const r = await polarCli(['export', '--db', db, '--session', session, ...args]);
  return {
    lines: r.stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l)),
    stderr: r.stderr,
    code: r.code,
  };
}
