import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 10, defect 4: after `kill -9`, rows stayed `in_progress` and sessions `active` forever.
 * Two proxy processes share one database; one is killed mid-stream while the other is mid-call.
 * The killed one's call and session read `interrupted` (keeping the tokens that had arrived) for
 * every later reader; the live one's are never touched and finish normally.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const execp = promisify(execFile);
let upstream: ReferenceUpstream;
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  // One token per chunk, 80 ms apart: a reply streams for several seconds.
  upstream = await startReferenceUpstream({ chunkTokens: 1, chunkDelayMs: 80 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-owners-'));
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await upstream?.close();
  removeTree(dir);
});

async function spawnProxy(db: string, session: string): Promise<{ child: ChildProcess; baseUrl: string }> {
  const child = spawn(process.execPath, [BIN, 'proxy', '--upstream', upstream.url, '--port', '0', '--db', db, '--session', session, '--json', '--quiet'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`polar proxy exited with ${code}: ${stderr}`)));
  });
  return { child, baseUrl: (JSON.parse(line) as { baseUrl: string }).baseUrl };
}

/** Starts a streaming call and resolves once `tokens` content pieces have arrived; the rest keeps streaming. */
async function startStream(baseUrl: string, tokens: number): Promise<{ rest: Promise<string> }> {
  const client = new OpenAI({ baseURL: baseUrl, apiKey: 'x', maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'm',
    stream: true,
    messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse keeper and the sea.' }],
  });
  const it = stream[Symbol.asyncIterator]();
  let text = '';
  let pieces = 0;
  while (pieces < tokens) {
    const next = await it.next();
    if (next.done) break;
    const d = next.value.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
    if (d?.content || d?.reasoning_content) pieces++;
    text += d?.content ?? '';
  }
  const rest = (async () => {
    for (let next = await it.next(); !next.done; next = await it.next()) text += next.value.choices[0]?.delta.content ?? '';
    return text;
  })();
  rest.catch(() => {});
  return { rest };
}

describe('crash reconciliation', () => {
  it(
    "a killed proxy's call and session read interrupted with their tokens so far; a live proxy sharing the database is untouched",
    async () => {
      const db = path.join(dir, 'shared.db');
      const killed = await spawnProxy(db, 'ses-killed');
      const live = await spawnProxy(db, 'ses-live');

      // 20 tokens at 80 ms each: well past the 1 s checkpoint.
      await startStream(killed.baseUrl, 20);
      const liveCall = await startStream(live.baseUrl, 2);
      killed.child.kill('SIGKILL');
      await new Promise((resolve) => killed.child.once('exit', resolve));

      // A reading command reconciles: it sees the dead owner's rows as interrupted.
      const { stdout } = await execp(process.execPath, [BIN, 'sessions', '--db', db, '--json']);
      const sessions = JSON.parse(stdout).sessions as { id: string; status: string }[];
      expect(sessions.find((s) => s.id === 'ses-killed')?.status).toBe('interrupted');
      expect(sessions.find((s) => s.id === 'ses-live')?.status).toBe('active');

      const store = Store.open(db, { readonly: true });
      try {
        const [interrupted] = store.requests.list('ses-killed');
        const row = store.requests.get(interrupted!.id)!;
        expect(row.status).toBe('interrupted');
        expect(row.errorCode).toBe('POLAR_INTERRUPTED');
        // The tokens that had arrived: the prompt whole, a prefix of what was being sampled.
        const sampled = upstream.calls[0]!.reply;
        expect(row.promptIds).toEqual(upstream.calls[0]!.promptIds);
        expect(row.sampledIds!.length).toBeGreaterThan(0);
        expect(row.sampledIds!.length).toBeLessThan(sampled.ids.length);
        expect(row.sampledIds).toEqual(sampled.ids.slice(0, row.sampledIds!.length));
        expect(row.logprobs).toEqual(sampled.logprobs.slice(0, row.sampledIds!.length));
        expect(row.reply).toContain('data: ');
        // The live proxy's call, mid-stream right now, is untouched.
        expect(store.requests.list('ses-live')[0]!.status).toBe('in_progress');
      } finally {
        store.close();
      }

      const text = await liveCall.rest;
      expect(text.length).toBeGreaterThan(0);
      live.child.kill('SIGTERM');
      await new Promise((resolve) => live.child.once('exit', resolve));
      const after = Store.open(db, { readonly: true });
      try {
        expect(after.requests.list('ses-live')[0]!.status).toBe('ok');
        expect(after.sessions.get('ses-live')!.status).toBe('completed');
        expect(after.sessions.get('ses-killed')!.status).toBe('interrupted');
        // Interrupted calls count as failed, never as in progress, and are never trained on.
        expect(after.sessions.summary('ses-killed')).toMatchObject({ requests: 1, failed: 1 });
      } finally {
        after.close();
      }
    },
    patient(60_000),
  );
});
