import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { Store } from '../../src/store/store.js';
import { polarRun, TASK, workspace } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';

/**
 * What `polar run` shows while a harness works: one readable line per model call on stdout, not the
 * harness's own output. Claude Code (run with `--output-format stream-json`) prints a raw JSON event
 * stream; that goes to the run's log file alone.
 */
let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer();
});
afterAll(async () => {
  await mock?.close();
});

it('polar run --harness claude-code prints a line per captured call; the raw stream is only in the log', { timeout: patient(300_000) }, async () => {
  const w = workspace();
  try {
    const session = 'readable-run';
    // As a user types it (no --json); the temporary paths hold no spaces.
    const flags = `--harness claude-code --upstream ${mock.url} --cwd ${w.ws} --db ${w.db} --session ${session} --timeout ${patientSeconds(240)}`;
    const r = await polarRun([...flags.split(' '), '--prompt', TASK]);
    const logFile = path.join(w.dir, '.polar', 'runs', session, 'harness.log');
    expect(r.code, `${r.stderr}\n${fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-3000) : ''}`).toBe(0);

    const store = Store.open(w.db, { readonly: true });
    const calls = store.requests.list(session);
    store.close();
    expect(calls.length).toBeGreaterThanOrEqual(3);

    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    // No raw event reached the terminal: every line is one of polar's, one per recorded call, in order.
    expect(lines.filter((l) => l.trimStart().startsWith('{'))).toEqual([]);
    expect(lines).toHaveLength(calls.length);
    expect(lines.map((l) => Number(/^call (\d+) {2}/.exec(l)?.[1]))).toEqual(calls.map((c) => c.seq));
    for (const [i, line] of lines.entries()) {
      const c = calls[i]!;
      expect(line).toContain(`  ${c.provider}  ${c.promptTokenCount!.toLocaleString('en')} → ${c.sampledTokenCount!.toLocaleString('en')} tokens  `);
    }
    // What the model did is readable: the scripted task runs a shell command and writes a file.
    expect(lines.some((l) => /tool_calls|tool_use/.test(l) && /: /.test(l.split('  ').at(-1)!))).toBe(true);
    expect(r.stderr).toMatch(new RegExp(`session ${session} completed \\(exit 0\\): ${calls.length} calls`));

    // The stream itself is kept, whole, in the log file.
    const log = fs.readFileSync(logFile, 'utf8');
    const events = log
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type?: string });
    expect(events.filter((e) => e.type === 'assistant').length).toBeGreaterThanOrEqual(calls.length);
    expect(events.at(-1)?.type).toBe('result');
  } finally {
    w.cleanup();
  }
});
