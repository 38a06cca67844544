import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { TestOutcome } from './types.js';

/** A report larger than this is not a runner's: no test suite polar grades writes 64 MiB of results. */
const REPORT_MAX = 64 * 1024 * 1024;

/**
 * The report a runner left in the report folder, read as a regular file only (the agent's code ran
 * in the runner's process and could leave a link to any file polar can read).
 */
export async function readReport(reportDir: string, name: string): Promise<string> {
  const file = path.join(reportDir, name);
  const st = await fs.lstat(file).catch(() => null);
  if (!st) throw new Error(`the test runner wrote no report (${name}): it ended before it could`);
  if (!st.isFile()) throw new Error(`the test runner's report ${name} is not a regular file`);
  if (st.size > REPORT_MAX) throw new Error(`the test runner's report ${name} is ${st.size} bytes, over ${REPORT_MAX}`);
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  try {
    return (await handle.readFile()).toString('utf8');
  } finally {
    await handle.close();
  }
}

/** polar's own runners write `{"tests": {"<id>": "passed" | "failed" | "skipped"}}`. */
export function parseOutcomes(text: string): Map<string, TestOutcome> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error("the test runner's report is not JSON", { cause: err });
  }
  const tests = (parsed as { tests?: unknown } | null)?.tests;
  if (typeof tests !== 'object' || tests === null || Array.isArray(tests)) throw new Error("the test runner's report has no tests object");
  const out = new Map<string, TestOutcome>();
  for (const [id, outcome] of Object.entries(tests)) {
    if (outcome !== 'passed' && outcome !== 'failed' && outcome !== 'skipped')
      throw new Error(`the test runner's report gives ${id} the outcome ${JSON.stringify(outcome)}`);
    out.set(id, outcome);
  }
  return out;
}
