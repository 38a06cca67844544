import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../src/proxy/server.js';
import { openStore } from '../../src/store/open.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { journalPath } from '../../src/store/postgres/journal.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { createUpstream } from '../../src/upstream/create.js';
import { patient } from '../support/patience.js';
import { polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A machine that never comes back (issue 43): the calls its journal had not shipped when it died
 * are on its disk only. README "Many machines" says how to get them in; these are those two ways,
 * run for real: the machine's state folder on another machine and any writing command there, or
 * `polar db copy` from the journal file.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
const shipTimeout = process.env.POLAR_SHIP_TIMEOUT_MS;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-lost-host-'));
  // A writer that closes while PostgreSQL is down gives up waiting after half a second.
  process.env.POLAR_SHIP_TIMEOUT_MS = '500';
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
}, patient(120_000));

afterAll(async () => {
  if (shipTimeout === undefined) delete process.env.POLAR_SHIP_TIMEOUT_MS;
  else process.env.POLAR_SHIP_TIMEOUT_MS = shipTimeout;
  await upstream?.close();
  await server?.close();
  removeTree(dir);
});

/** Two calls captured on "the lost machine" (state folder `state`) while PostgreSQL is down: they stay in its journal. */
async function captureWhileDown(url: string, state: string, session: string): Promise<string> {
  const before = process.env.POLAR_STATE_DIR;
  process.env.POLAR_STATE_DIR = state;
  const pg = new Postgres(url);
  await migratePostgres(pg).finally(() => pg.close());
  await server.stop();
  try {
    const notices: string[] = [];
    const store = await openStore(url, { onNotice: (line) => notices.push(line) });
    const up = await createUpstream('vllm', { baseUrl: upstream.url });
    const proxy = await startProxy({ store, upstream: up, servedModel: 'Qwen/Qwen3-8B', defaultSession: session });
    try {
      const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 });
      for (const text of ['one', 'two'])
        await client.chat.completions.create({ model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: text }], max_tokens: 8 });
    } finally {
      await proxy.close(2000);
      await up.close();
      await store.closeAsync();
    }
    expect(notices.join('\n')).toMatch(/rows are still waiting in .*journal-.*next polar process on this machine ships them/);
    return journalPath(url, { ...process.env, POLAR_STATE_DIR: state });
  } finally {
    await server.start();
    if (before === undefined) delete process.env.POLAR_STATE_DIR;
    else process.env.POLAR_STATE_DIR = before;
  }
}

async function callsIn(url: string, session: string): Promise<number> {
  const pg = new Postgres(url);
  try {
    return Number((await pg.query(`SELECT count(*) AS n FROM requests WHERE session_id = $1 AND status = 'ok'`, [session])).rows[0]!.n);
  } finally {
    await pg.close();
  }
}

describe('a machine that never returns: its unshipped calls', () => {
  it(
    'its state folder, mounted on another machine, is shipped from there by polar db ship',
    async () => {
      const url = await server.database('moved');
      const lost = path.join(dir, 'lost-state');
      await captureWhileDown(url, lost, 'ses-moved');
      expect(await callsIn(url, 'ses-moved')).toBe(0);
      // The disk brought to a machine that is still there, as its POLAR_STATE_DIR.
      const recovered = path.join(dir, 'recovered-state');
      fs.cpSync(lost, recovered, { recursive: true });
      const r = await polarCli(['db', 'ship', '--db', url, '--json'], { env: { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: recovered } });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, left: 0 });
      expect(JSON.parse(r.stdout).shipped).toBeGreaterThanOrEqual(4);
      // Without the folder it says where it looked and what to set.
      const none = await polarCli(['db', 'ship', '--db', url], { env: { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'empty') } });
      expect(none.code).not.toBe(0);
      expect(none.stderr).toMatch(/no journal for .* set POLAR_STATE_DIR/);
      expect(await callsIn(url, 'ses-moved')).toBe(2);
    },
    patient(120_000),
  );

  it(
    'or its journal file copied in with polar db copy, idempotently',
    async () => {
      const url = await server.database('copied');
      const journal = await captureWhileDown(url, path.join(dir, 'lost-state-2'), 'ses-copied');
      expect(await callsIn(url, 'ses-copied')).toBe(0);
      for (let i = 0; i < 2; i++) {
        const r = await polarCli(['db', 'copy', '--from', journal, '--to', url], {
          env: { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'elsewhere') },
        });
        expect(r.code, r.stderr).toBe(0);
      }
      expect(await callsIn(url, 'ses-copied')).toBe(2);
    },
    patient(120_000),
  );

  it('worker --help says where a machine keeps what it has not shipped, and how to ship it from a lost one', async () => {
    const help = await polarCli(['worker', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/POLAR_STATE_DIR\s+this machine's state: the journal/);
    expect(help.stdout).toMatch(/polar db ship --db URL/);
  });
});
