import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMaster } from '../../src/proxy/session-keys.js';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { BIN, customRunArgs, polarRun, spawnPolar, workspace, type Workspace } from './support.js';
import { patient } from '../support/patience.js';

/**
 * `polar proxy --session-keys` as a user starts it, and `polar run --proxy` on the same machine and
 * database: the run's harness gets a key the proxy accepts (minted from the master file beside the
 * database), a caller that only names the session is refused, and `polar audit` shows it.
 */
const AGENT = `
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'hi' }] }),
});
if (!res.ok) process.exit(3);
await res.json();
`;

let upstream: ReferenceUpstream;
let w: Workspace;
let proxy: ChildProcess;
let url: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  w = workspace();
  fs.writeFileSync(path.join(w.dir, 'agent.mjs'), AGENT);
  proxy = spawnPolar(['proxy', '--session-keys', '--upstream', upstream.url, '--port', '0', '--db', w.db, '--json', '-q']);
  const first = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: proxy.stdout! }).once('line', resolve);
    proxy.once('exit', (code) => reject(new Error(`polar proxy exited ${code}`)));
  });
  const info = JSON.parse(first) as { url: string; sessionKeys: boolean };
  expect(info.sessionKeys).toBe(true);
  url = info.url;
}, patient(60_000));

afterAll(async () => {
  if (proxy && proxy.exitCode === null) {
    const exited = new Promise((resolve) => proxy.once('exit', resolve));
    proxy.kill('SIGTERM');
    await exited;
  }
  await upstream?.close();
  w?.cleanup();
});

describe('polar proxy --session-keys with polar run --proxy', () => {
  it("the run's harness is accepted with the key it was given; a caller naming the session without it is refused and audited", async () => {
    const master = path.join(w.dir, '.polar', 'session-keys.master');
    expect(fs.statSync(master).mode & 0o777).toBe(0o600);

    const r = await polarRun(
      customRunArgs({
        command: `${process.execPath} ${path.join(w.dir, 'agent.mjs')}`,
        via: ['--proxy', `${url}/v1`, '--model', 'Qwen/Qwen3-8B'],
        ws: w.ws,
        db: w.db,
        session: 'owner',
        extra: ['--sandbox-ro', path.join(w.dir, 'agent.mjs')],
      }),
    );
    expect(r.code, r.stderr).toBe(0);

    const attack = await fetch(`${url}/s/owner/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer polar-owner' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'injected' }] }),
    });
    expect(attack.status).toBe(401);

    const store = Store.open(w.db, { readonly: true });
    try {
      expect(store.requests.list('owner').map((c) => c.httpStatus)).toEqual([200]);
    } finally {
      store.close();
    }
    // The key the run minted is nowhere in the database (not the session row, not the call's headers).
    const key = readMaster(master)!.keyFor('owner');
    const bytes = Buffer.concat([w.db, `${w.db}-wal`].filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f)));
    for (const needle of [key, key.split('~')[1]!]) expect(bytes.includes(Buffer.from(needle))).toBe(false);
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'audit', '--db', w.db, '--json'], { env: { ...process.env, NO_COLOR: '1' } });
    const audit = JSON.parse(stdout) as { refused: { reason: string; claimedSession: string; requestHeaders: Record<string, string> }[] };
    expect(audit.refused).toMatchObject([{ reason: 'no-secret', claimedSession: 'owner', requestHeaders: { authorization: '[redacted]' } }]);
    const text = await promisify(execFile)(process.execPath, [BIN, 'audit', '--db', w.db], { env: { ...process.env, NO_COLOR: '1' } });
    expect(text.stdout).toMatch(/no-secret\s+owner\s+POST\s+\/s\/owner\/v1\/chat\/completions/);
  });
});
