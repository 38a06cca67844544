import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarRun, TASK, taskRunArgs, workspace } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';

/**
 * Issue 40, a new user's first hour: what `polar run --harness claude-code` tells the user as it
 * starts (the folder the agent writes in) and what it relays from the harness (no line that reads
 * as a fault when it is only Claude Code not knowing a model that is not Claude).
 */
const bwrap = findBwrap();
const sandboxed = bwrap !== null && bwrapProblem(bwrap) === null;

let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer();
});
afterAll(async () => {
  await mock?.close();
});

it('says where the agent writes; Claude Code\'s "unrecognized_model" line reaches the log, not the terminal', { timeout: patient(300_000) }, async () => {
  const w = workspace();
  try {
    const session = 'first-hour';
    // As a user types it (no --json); the temporary paths hold no spaces.
    const flags = `--harness claude-code --upstream ${mock.url} --cwd ${w.ws} --db ${w.db} --session ${session} --timeout ${patientSeconds(240)}`;
    const r = await polarRun([...flags.split(' '), '--prompt', TASK]);
    const log = fs.readFileSync(path.join(w.dir, '.polar', 'runs', session, 'harness.log'), 'utf8');
    expect(r.code, `${r.stderr}\n${log.slice(-3000)}`).toBe(0);

    const where = sandboxed ? `agent writes in ${w.ws} (--cwd)` : `agent works in ${w.ws} (--cwd); unsandboxed, it can write anywhere you can`;
    expect(r.stderr.split('\n')).toContain(`polar run: ${where}`);
    // Printed as the run starts, before the summary.
    expect(r.stderr.indexOf(where)).toBeLessThan(r.stderr.indexOf(`session ${session} completed`));

    // Claude Code 2.1.330 says it on stderr for every model id it does not know as Claude's.
    expect(log).toContain(`[claude-code:unrecognized_model] {"model":"${mock.model}"`);
    expect(r.stderr).not.toContain('unrecognized_model');
  } finally {
    w.cleanup();
  }
});

it('--json: the result names the folder the agent wrote in', { timeout: patient(300_000) }, async () => {
  const w = workspace();
  try {
    const r = await polarRun(taskRunArgs('claude-code', ['--upstream', mock.url], w, 'first-hour-json'));
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, status: 'completed', cwd: w.ws });
    expect(r.stderr).not.toContain('unrecognized_model');
  } finally {
    w.cleanup();
  }
});
