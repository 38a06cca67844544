import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startProxy, type RunningProxy } from '../../src/proxy/server.js';
import { currentProcess } from '../../src/store/owner.js';
import { Store } from '../../src/store/store.js';
import { createUpstream } from '../../src/upstream/create.js';
import type { Upstream } from '../../src/upstream/types.js';
import { startReferenceUpstream } from '../support/reference-upstream/index.js';
import { mountable, mountTmpfs, type Tmpfs } from '../support/tmpfs.js';
import { waitUntil } from '../support/wait.js';

const BIN = path.resolve(__dirname, '../../bin/polar.js');

/**
 * The capture proxy on a disk that fills up, for real (a small tmpfs holding the database): the
 * caller is told `disk full: <db>` with 507 in its own API's shape (not a generic OpenAI-shaped 500);
 * a reply polar could not record is not passed on as if it had been; a row whose reply went out is
 * written once the disk has room again, never left in_progress; closing on a full disk throws nothing.
 */

/** An upstream that holds each call until the test answers it. */
interface GateUpstream {
  url: string;
  /** Resolves when a call is waiting; `answer` sends it a status and body. */
  waiting(): Promise<(status: number, body: unknown) => void>;
  close(): Promise<void>;
}

async function gateUpstream(): Promise<GateUpstream> {
  const queue: ((status: number, body: unknown) => void)[] = [];
  const waiters: ((a: (status: number, body: unknown) => void) => void)[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const w = waiters.shift();
      if (w) w(answer);
      else queue.push(answer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    waiting: () => new Promise((resolve) => (queue.length > 0 ? resolve(queue.shift()!) : waiters.push(resolve))),
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

const TOO_LONG = { error: { message: "This model's maximum context length is 40960 tokens.", type: 'BadRequestError', code: 400 } };

let m: Tmpfs | undefined;
let gate: GateUpstream | undefined;
let upstream: Upstream | undefined;
let proxy: RunningProxy | undefined;
let store: Store | undefined;

afterEach(async () => {
  await proxy?.close(1000);
  await upstream?.close();
  await gate?.close();
  store?.close();
  m?.unmount();
  m = gate = upstream = proxy = store = undefined;
});

async function start(options: { authToken?: string } = {}): Promise<string> {
  m = mountTmpfs(2048);
  const file = path.join(m.dir, 'polar.db');
  store = Store.open(file);
  gate = await gateUpstream();
  upstream = await createUpstream('vllm', { baseUrl: gate.url, connectTimeoutMs: 2000 });
  proxy = await startProxy({ store, upstream, servedModel: 'm', defaultSession: 'disk', ...options });
  return file;
}

async function post(
  route: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: { type?: string; error: { type?: string; message: string } } }> {
  const res = await fetch(`${proxy!.url}${route}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, json: (await res.json()) as { error: { message: string } } };
}

const MESSAGES = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

describe.skipIf(mountable !== null)('the proxy on a full disk', () => {
  it("refused calls answer 507 in the caller's API shape, naming the disk", async () => {
    const file = await start({ authToken: 'tok' });
    m!.fill();
    const anthropic = await post('/v1/messages', MESSAGES);
    expect(anthropic.status).toBe(507);
    expect(anthropic.json).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    expect(anthropic.json.error.message).toContain(`disk full: ${file}`);
    const openai = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(openai.status).toBe(507);
    expect(openai.json.error.message).toContain(`disk full: ${file}`);
    const gemini = await post('/v1beta/models/m:generateContent', { contents: [] });
    expect(gemini.status).toBe(507);
    expect(gemini.json.error).toMatchObject({ code: 507 });
  });

  it('an upstream 400 that cannot be recorded reaches the caller as 507, and its row is written once the disk has room', async () => {
    const file = await start();
    const reply = post('/v1/messages', MESSAGES);
    const answer = await gate!.waiting();
    // The row is in the database (in_progress) while the upstream works.
    await waitUntil('the in-progress row', () => store!.requests.list('disk').length > 0, { everyMs: 10 });
    const [row] = store!.requests.list('disk');
    expect(row).toMatchObject({ status: 'in_progress' });
    m!.fill();
    answer(400, TOO_LONG);
    const got = await reply;
    expect(got.status).toBe(507);
    expect(got.json).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    expect(got.json.error.message).toContain(`disk full: ${file}`);
    expect(store!.requests.get(row!.id)).toMatchObject({ status: 'in_progress' });

    // Room again: the next call writes the first one's row before its own.
    m!.free();
    const next = post('/v1/messages', MESSAGES);
    (await gate!.waiting())(400, TOO_LONG);
    expect((await next).status).toBe(400);
    const rows = store!.requests.list('disk');
    expect(rows.map((r) => r.status)).toEqual(['error', 'error']);
    expect(store!.requests.get(row!.id)).toMatchObject({ status: 'error', httpStatus: 507, errorCode: 'POLAR_STORE_WRITE' });
  });

  it('closing on a full disk throws nothing; what is left unwritten is interrupted by the next opener', async () => {
    const file = await start();
    const reply = post('/v1/messages', MESSAGES);
    const answer = await gate!.waiting();
    await waitUntil('the in-progress row', () => store!.requests.list('disk').length > 0, { everyMs: 10 });
    m!.fill();
    answer(400, TOO_LONG);
    expect((await reply).status).toBe(507);
    await proxy!.close(1000);
    proxy = undefined;
    expect(() => store!.close()).not.toThrow();
    store = undefined;
    m!.free();
    const again = Store.open(file);
    try {
      // The row stays in_progress under an owner that did not close, which is what crash recovery
      // looks for: once this process is gone (here: as after a reboot) the row is interrupted.
      expect(again.requests.list('disk').map((r) => r.status)).toEqual(['in_progress']);
      const afterReboot = { ...currentProcess(), bootId: 'another-boot' };
      expect(again.owners!.reconcile(again.ownerId, afterReboot).calls).toBe(1);
      expect(again.requests.list('disk').map((r) => r.status)).toEqual(['interrupted']);
    } finally {
      again.close();
    }
  });

  it('polar proxy on a full disk: 507 naming the disk for a stream too, and Ctrl-C ends it with a warning, no stack trace', async () => {
    m = mountTmpfs(2048);
    const file = path.join(m.dir, 'polar.db');
    const reference = await startReferenceUpstream({ log: false });
    const child = spawn(process.execPath, [BIN, 'proxy', '--db', file, '--upstream', reference.url, '--port', '0', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1' },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      const banner = await new Promise<{ url: string }>((resolve, reject) => {
        child.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()) as { url: string }));
        child.once('exit', () => reject(new Error(stderr)));
      });
      m.fill();
      const res = await fetch(`${banner.url}/v1/messages`, { method: 'POST', body: JSON.stringify(MESSAGES), headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(507);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`disk full: ${file}`);
      const streamed = await fetch(`${banner.url}/v1/messages`, {
        method: 'POST',
        body: JSON.stringify({ ...MESSAGES, stream: true }),
        headers: { 'content-type': 'application/json' },
      });
      // Refused before its headers (507), or, where they went out before the end could not be
      // written, ended by an error event: either way the harness reads that the disk is full.
      if (streamed.headers.get('content-type')?.startsWith('text/event-stream')) expect(await streamed.text()).toMatch(/event: error\ndata: .*disk full/);
      else expect([streamed.status, await streamed.text()]).toEqual([507, expect.stringContaining(`disk full: ${file}`)]);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(stderr).toContain(`disk full: ${file}`);
      expect(stderr).not.toMatch(/\n\s+at |POLAR_INTERNAL/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await reference.close();
    }
  });
});
