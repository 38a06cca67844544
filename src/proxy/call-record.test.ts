import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../store/store.js';
import { CallRecord } from './call-record.js';

const SECRET = 'sk-polar-7f3a9c-secret';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function record(store: Store, id: string): CallRecord {
  store.sessions.ensure('s1', { upstreamUrl: 'http://127.0.0.1:1', servedModel: 'm', metadata: {} });
  return new CallRecord(
    store,
    {
      id,
      sessionId: 's1',
      agentId: 'main',
      provider: 'openai-chat',
      method: 'POST',
      path: '/v1/chat/completions',
      startedAt: 1,
      streamed: true,
      requestHeaders: {},
      originalRequest: '{}',
      upstreamRequest: '{}',
      requestedModel: 'm',
      servedModel: 'm',
    },
    [SECRET],
  );
}

describe('CallRecord', () => {
  it('stores a reply given as the bytes that went out as the same text, secrets scrubbed, at the end and at a checkpoint', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-call-record-'));
    dirs.push(dir);
    const store = Store.open(path.join(dir, 'polar.db'));
    try {
      const sse = `data: {"choices":[{"delta":{"content":"café 🚀 your key is ${SECRET}"}}]}\n\ndata: [DONE]\n\n`;
      const live = record(store, 'c1');
      live.begin({});
      live.checkpoint({ source: 'upstream', promptIds: [1], sampledIds: [2], logprobs: [-0.5] }, Buffer.from(sse, 'utf8'));
      expect(store.requests.get('c1')!.reply).toBe(sse.replace(SECRET, '[redacted]'));
      live.end({ status: 'ok', httpStatus: 200, reply: Buffer.from(sse, 'utf8') });
      const row = store.requests.get('c1')!;
      expect(row.reply).toBe(sse.replace(SECRET, '[redacted]'));
      expect(typeof row.reply).toBe('string');
    } finally {
      store.close();
    }
  });
});
