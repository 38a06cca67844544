import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { DEMO_CONTENT, DEMO_FILE } from '../../src/mock-server/script.js';
import { Store } from '../../src/store/store.js';
import { expectSessionCapturedExactly, HARNESSES, nodeFor, polarRun, taskRunArgs, workspace } from './support.js';
import { patient } from '../support/patience.js';

/**
 * The real harness CLIs (devDependencies), each run by `polar run` against the mock server: the
 * harness must really carry out the scripted task with its shell tool (the file it writes exists
 * with the right content), and every call must be in the database, token-exact, in the session.
 */
let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer();
});
afterAll(async () => {
  await mock?.close();
});

describe.each(HARNESSES)('polar run --harness $name', (harness) => {
  const { name } = harness;
  const { node, skip } = nodeFor(harness);

  it.skipIf(skip)('completes the scripted task with its own shell tool, every call captured exactly', { timeout: patient(300_000) }, async () => {
    const w = workspace();
    try {
      const session = `e2e-${name}`;
      const r = await polarRun(taskRunArgs(name, ['--upstream', mock.url], w, session, node ? ['--node', node] : []));
      const result = JSON.parse(r.stdout.slice(r.stdout.lastIndexOf('\n{') + 1)) as {
        exitCode: number;
        status: string;
        harnessVersion: string | null;
        logFile: string;
      };
      expect(
        result.exitCode,
        `${name} exited ${result.exitCode}; log ${result.logFile}:\n${fs.existsSync(result.logFile) ? fs.readFileSync(result.logFile, 'utf8').slice(-3000) : ''}`,
      ).toBe(0);
      expect(fs.readFileSync(path.join(w.ws, DEMO_FILE), 'utf8').trim()).toBe(DEMO_CONTENT);
      const store = Store.open(w.db, { readonly: true });
      const summary = store.sessions.summary(session)!;
      const calls = store.requests.list(session);
      store.close();
      expect(summary).toMatchObject({ harness: name, status: 'completed' });
      expect(summary.harnessVersion).toMatch(/^\d+\.\d+/);
      // ls, write the file, answer: at least three model calls of the main agent.
      expect(calls.filter((c) => c.agentId === 'main' && c.status === 'ok').length).toBeGreaterThanOrEqual(3);
      // …and not many more: a harness that loops (a dropped tool call, a compaction cycle) fails here.
      expect(calls.length).toBeLessThan(12);
      expect(expectSessionCapturedExactly(w.db, session, mock)).toBe(calls.filter((c) => c.status === 'ok').length);
    } finally {
      w.cleanup();
    }
  });
});
