import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy } from '../support/start-proxy.js';
import { removeTree } from '../support/remove-tree.js';

const BIN = path.resolve(__dirname, '../../bin/polar.js');
let upstream: ReferenceUpstream;
let dir: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ chunkDelayMs: 20 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-life-'));
});

afterAll(async () => {
  await upstream?.close();
  removeTree(dir);
});

describe('polar proxy process lifecycle', () => {
  it('the banner shows the per-session base URL as a pattern to fill in, not URL-encoded', async () => {
    const child = spawn(
      process.execPath,
      [BIN, 'proxy', '--upstream', upstream.url, '--port', '0', '--db', path.join(dir, 'banner.db'), '--session', 'banner'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, NO_COLOR: '1' },
      },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const line = await new Promise<string>((resolve) => {
      const lines = readline.createInterface({ input: child.stdout! });
      lines.on('line', (l) => l.includes('base URL') && resolve(l));
    });
    child.kill('SIGINT');
    expect(line).toMatch(/base URL {3}http:\/\/127\.0\.0\.1:\d+\/v1 {3}\(per session: http:\/\/127\.0\.0\.1:\d+\/s\/<session>\/v1\)$/);
    expect(await exited).toBe(0);
  });

  it('on SIGINT lets an in-flight stream finish, records it, ends the session and closes the database', async () => {
    const db = path.join(dir, 'life.db');
    const child = spawn(process.execPath, [BIN, 'proxy', '--upstream', upstream.url, '--port', '0', '--db', db, '--json', '--quiet', '--session', 'life'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const info = JSON.parse(await new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once('line', resolve))) as {
      baseUrl: string;
      model: string;
    };
    // Without --model the proxy serves the upstream's first model.
    expect(info.model).toBe('Qwen/Qwen3-8B');
    const client = new OpenAI({ baseURL: info.baseUrl, apiKey: 'x', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'a slow one' }] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    let content = '';
    let signalled = false;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      if (!signalled) {
        child.kill('SIGINT');
        signalled = true;
      }
    }
    expect(content).toBe(upstream.calls[upstream.calls.length - 1]!.reply.content);
    expect(await exited).toBe(0);

    expect(fs.existsSync(`${db}-wal`) ? fs.statSync(`${db}-wal`).size : 0).toBe(0); // checkpointed on close
    const store = Store.open(db, { readonly: true });
    try {
      expect(store.sessions.get('life')).toMatchObject({ status: 'completed', servedModel: 'Qwen/Qwen3-8B' });
      expect(store.requests.list('life')).toEqual([expect.objectContaining({ status: 'ok', streamed: true })]);
    } finally {
      store.close();
    }
  });
});

describe('--upstream-kind openai', () => {
  it('sends no token flags and records the text with token_source none', async () => {
    const t = await startTestProxy(upstream.url, { upstreamKind: 'openai' });
    try {
      const client = new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'x', maxRetries: 0 });
      const reply = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'text only' }] });
      expect(reply.choices[0]!.message.content).toContain('text only');
      const sent = upstream.calls[upstream.calls.length - 1]!.body;
      expect(sent).not.toHaveProperty('return_token_ids');
      expect(sent).not.toHaveProperty('logprobs');
      const row = t.store.requests.get(t.store.requests.list(t.session)[0]!.id)!;
      expect(row).toMatchObject({ status: 'ok', tokenSource: 'none', promptIds: null, sampledIds: null, logprobs: null, tokenError: null });
      expect(JSON.parse(row.reply!).choices[0].message.content).toBe(reply.choices[0]!.message.content);
    } finally {
      await t.close();
    }
  });
});
