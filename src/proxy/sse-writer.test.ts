import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { PolarError } from '../core/errors.js';
import { SseWriter } from './sse-writer.js';

/** A response that logs cork/flush/write, and answers write with `accept` (false: wait for drain). */
function fakeResponse(accept = true) {
  const log: string[] = [];
  const res = Object.assign(new EventEmitter(), {
    write: (bytes: Buffer) => {
      log.push(`write ${bytes.toString('utf8').trim()}`);
      return accept;
    },
  });
  return { res: res as unknown as ServerResponse, emitter: res, log };
}

describe('SseWriter', () => {
  it("sends one turn's events in one write, keeps their text, and restarts the keep-alive once per write", async () => {
    const { res, log } = fakeResponse();
    let sends = 0;
    const out = new SseWriter(res, () => sends++);
    await out.write([{ data: 'a' }]);
    await out.write([]);
    await out.write([{ event: 'e', data: 'b' }, { data: 'c' }]);
    expect(log).toEqual([]);
    await new Promise((r) => process.nextTick(r));
    expect(log).toEqual(['write data: a\n\nevent: e\ndata: b\n\ndata: c']);
    expect(sends).toBe(1);
    expect(out.bytes().toString('utf8')).toBe('data: a\n\nevent: e\ndata: b\n\ndata: c\n\n');
    await out.write([{ data: 'd' }]);
    await new Promise((r) => process.nextTick(r));
    expect(log).toHaveLength(2);
    expect(sends).toBe(2);
  });

  it('keeps the bytes it wrote as the reply, with what is translated but not yet written and a tail after them', async () => {
    const { res } = fakeResponse();
    const out = new SseWriter(res, () => {});
    await out.write([{ data: 'café 🚀' }]);
    out.flush();
    await out.write([{ data: 'b' }]);
    expect(out.bytes('data: [DONE]\n\n')).toEqual(Buffer.from('data: café 🚀\n\ndata: b\n\ndata: [DONE]\n\n', 'utf8'));
    expect(out.bytes().toString('utf8')).toBe('data: café 🚀\n\ndata: b\n\n');
  });

  it('writes at once when asked (before a database write), and what it wrote only once', async () => {
    const { res, log } = fakeResponse();
    const out = new SseWriter(res, () => {});
    await out.write([{ data: 'a' }]);
    out.flush();
    out.flush();
    expect(log).toEqual(['write data: a']);
    await new Promise((r) => process.nextTick(r));
    expect(log).toEqual(['write data: a']);
  });

  it('holds the next write until drain, and fails it with POLAR_CLIENT_ABORTED if the harness leaves instead', async () => {
    const { res, emitter } = fakeResponse(false);
    const out = new SseWriter(res, () => {});
    await out.write([{ data: 'a' }]);
    out.flush();
    let waited = false;
    const next = out.write([{ data: 'b' }]).then(() => {
      waited = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(waited).toBe(false);
    emitter.emit('drain');
    await next;
    expect(waited).toBe(true);
    await out.write([{ data: 'c' }]);
    await new Promise((r) => process.nextTick(r));
    const closed = out.write([{ data: 'd' }]);
    emitter.emit('close');
    await expect(closed).rejects.toSatisfy((e) => e instanceof PolarError && e.code === 'POLAR_CLIENT_ABORTED');
    expect(emitter.listenerCount('drain') + emitter.listenerCount('close')).toBe(0);
  });
});
