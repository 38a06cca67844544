import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { Store } from '../../src/store/store.js';
import { polarCli } from '../support/polar-cli.js';
import { polarRun, taskRunArgs, workspace, type Workspace } from './support.js';
import { patient } from '../support/patience.js';

/**
 * Cassette replay with the real harness CLIs: a session recorded against the mock model is replayed
 * with no model at all (the cassette answers from the recording); every recorded call is made again
 * and answered, and the replay captures the same token ids. A recording whose reply was edited
 * afterwards diverges at the call that echoes the edit, with a clear error to the harness.
 */
let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer();
});
afterAll(async () => {
  await mock?.close();
});

async function replay(db: string, session: string, harness: string): Promise<{ code: number; result: Record<string, any> }> {
  const r = await polarCli(['replay', session, '--harness', harness, '--db', db, '--json'], {
    env: process.env,
    timeout: patient(280_000),
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: r.code, result: JSON.parse(r.stdout) };
}

describe.each(['claude-code', 'codex', 'gemini-cli'])('polar replay --harness %s', (harness) => {
  let w: Workspace;
  const session = `rec-${harness}`;
  beforeAll(async () => {
    w = workspace();
    const r = await polarRun(taskRunArgs(harness, ['--upstream', mock.url], w, session));
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
  }, patient(300_000));
  afterAll(() => w?.cleanup());

  it('reproduces every recorded call with no model, token for token', { timeout: patient(300_000) }, async () => {
    const before = mock.requestCount();
    const { code, result } = await replay(w.db, session, harness);
    expect(result.divergence).toBeNull();
    expect(code).toBe(0);
    expect(result).toMatchObject({ ok: true, unplayed: [] });
    expect(result.matched).toBe(result.total);
    expect(mock.requestCount()).toBe(before); // the model was never asked
    const store = Store.open(w.db, { readonly: true });
    try {
      const ok = (s: string) =>
        store.requests
          .list(s)
          .filter((c) => c.status === 'ok')
          .map((c) => store.requests.get(c.id)!);
      const recorded = ok(session);
      const replayed = ok(result.replaySession);
      expect(replayed.length).toBe(recorded.length);
      for (const r of replayed) {
        const twin = recorded.find((x) => JSON.stringify(x.sampledIds) === JSON.stringify(r.sampledIds));
        expect(twin, `replayed call #${r.seq} answered from a recorded one`).toBeDefined();
        expect(r.promptIds).toEqual(twin!.promptIds);
      }
      expect(store.sessions.get(result.replaySession)!.metadata).toMatchObject({ replay_of: session });
    } finally {
      store.close();
    }
  });

  it('a recording edited afterwards diverges at the call that echoes the edit, and the harness is told why', { timeout: patient(300_000) }, async () => {
    const edited = path.join(w.dir, 'edited.db');
    fs.copyFileSync(w.db, edited);
    const store = Store.open(edited);
    const [first] = store.requests.list(session);
    const message = store.requests.get(first!.id)!.assistantMessage as { content: string };
    store.db
      .prepare('UPDATE requests SET assistant_message = ? WHERE id = ?')
      .run(JSON.stringify({ ...message, content: `${message.content} EDITED-AFTERWARDS` }), first!.id);
    store.close();
    const { code, result } = await replay(edited, session, harness);
    expect(code).toBe(1);
    expect(result.divergence).toMatchObject({ expectedSeq: 2, what: 'assistant text', found: expect.stringContaining('EDITED-AFTERWARDS') });
    expect(fs.readFileSync(result.run.logFile, 'utf8')).toMatch(/diverged from the recording at recorded call #2/);
  });
});
