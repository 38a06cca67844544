import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { float64Bits } from '../support/bits.js';
import { removeTree } from '../support/remove-tree.js';

const BIN = path.resolve(__dirname, '../../bin/polar.js');

let upstream: ReferenceUpstream;
let dir: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-crash-'));
});

afterAll(async () => {
  await upstream?.close();
  removeTree(dir);
});

/** Runs the built CLI as a child process and resolves with its --json startup line. */
async function spawnProxy(db: string): Promise<{ child: ChildProcess; baseUrl: string; session: string }> {
  const child = spawn(process.execPath, [BIN, 'proxy', '--upstream', upstream.url, '--port', '0', '--db', db, '--json', '--quiet'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout! });
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`polar proxy exited with ${code}: ${stderr}`)));
  });
  const info = JSON.parse(line) as { baseUrl: string; session: string };
  return { child, ...info };
}

/** The assistant text inside a stored reply, as the harness received it. */
function replyContent(reply: string, streamed: boolean): string {
  if (!streamed) return JSON.parse(reply).choices[0].message.content;
  return reply
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? '')
    .join('');
}

describe('crash safety', () => {
  it('every call whose reply the client fully received survives SIGKILL, whole', async () => {
    const db = path.join(dir, 'crash.db');
    const { child, baseUrl, session } = await spawnProxy(db);
    const client = new OpenAI({ baseURL: baseUrl, apiKey: 'x', maxRetries: 0 });
    const received: { content: string; streamed: boolean }[] = [];
    for (let i = 0; i < 8; i++) {
      const messages = [{ role: 'user' as const, content: `call number ${i}` }];
      if (i % 2 === 0) {
        const stream = await client.chat.completions.create({ model: 'm', messages, stream: true });
        let content = '';
        for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
        received.push({ content, streamed: true });
      } else {
        const reply = await client.chat.completions.create({ model: 'm', messages });
        received.push({ content: reply.choices[0]!.message.content!, streamed: false });
      }
    }
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    expect((fs.statSync(db).mode & 0o777).toString(8)).toBe('600');
    const store = Store.open(db);
    try {
      const calls = store.requests.list(session);
      expect(calls).toHaveLength(8);
      calls.forEach((summary, i) => {
        const row = store.requests.get(summary.id)!;
        const sampled = upstream.calls[i]!;
        expect(row.seq).toBe(i + 1);
        expect(row.status).toBe('ok');
        expect(row.streamed).toBe(received[i]!.streamed);
        expect(row.sampledIds).toEqual(sampled.reply.ids);
        expect(row.promptIds).toEqual(sampled.promptIds);
        expect(float64Bits(row.logprobs!)).toEqual(float64Bits(sampled.reply.logprobs));
        expect(replyContent(row.reply!, row.streamed)).toBe(received[i]!.content);
      });
    } finally {
      store.close();
    }
  });
});
