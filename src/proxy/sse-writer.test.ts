import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { PolarError } from '../core/errors.js';
import { SseWriter } from './sse-writer.js';

/** A response that logs cork/uncork/write, and answers write with `accept` (false: wait for drain). */
function fakeResponse(accept = true) {
  const log: string[] = [];
  const res = Object.assign(new EventEmitter(), {
    cork: () => log.push('cork'),
    uncork: () => log.push('uncork'),
    write: (text: string) => {
      log.push(`write ${text.trim()}`);
      return accept;
    },
  });
  return { res: res as unknown as ServerResponse, emitter: res, log };
}

describe('SseWriter', () => {
  it("sends one turn's events inside one cork, keeps their text, and restarts the keep-alive on each send", async () => {
    const { res, log } = fakeResponse();
    let sends = 0;
    const out = new SseWriter(res, () => sends++);
    await out.write([{ data: 'a' }]);
    await out.write([]);
    await out.write([{ event: 'e', data: 'b' }, { data: 'c' }]);
    expect(log).toEqual(['cork', 'write data: a', 'write event: e\ndata: b\n\ndata: c']);
    await new Promise((r) => process.nextTick(r));
    expect(log.at(-1)).toBe('uncork');
    expect(sends).toBe(2);
    expect(out.text()).toBe('data: a\n\nevent: e\ndata: b\n\ndata: c\n\n');
  });

  it('uncorks at once when asked (before a database write), and only once', async () => {
    const { res, log } = fakeResponse();
    const out = new SseWriter(res, () => {});
    await out.write([{ data: 'a' }]);
    out.uncork();
    out.uncork();
    await new Promise((r) => process.nextTick(r));
    expect(log.filter((l) => l === 'uncork')).toHaveLength(1);
  });

  it('waits for drain, and fails with POLAR_CLIENT_ABORTED if the harness leaves instead', async () => {
    const { res, emitter } = fakeResponse(false);
    const out = new SseWriter(res, () => {});
    const drained = out.write([{ data: 'a' }]);
    emitter.emit('drain');
    await expect(drained).resolves.toBeUndefined();
    const closed = out.write([{ data: 'b' }]);
    emitter.emit('close');
    await expect(closed).rejects.toSatisfy((e) => e instanceof PolarError && e.code === 'POLAR_CLIENT_ABORTED');
    expect(emitter.listenerCount('drain') + emitter.listenerCount('close')).toBe(0);
  });
});
