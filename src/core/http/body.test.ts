import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it, vi } from 'vitest';
import { readBodyBytes } from './body.js';

/**
 * A large body is held once: read into one buffer of its declared length as it arrives, never
 * collected as chunks and joined (two copies at once; 4 concurrent 60 MB bodies peaked near 1 GB).
 * Counted by the allocations themselves, not by timing or RSS.
 */
let server: http.Server | undefined;

afterEach(async () => {
  vi.restoreAllMocks();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

/** A server that reads each request with readBodyBytes; the result, or the error, comes back to the test. */
async function reader(limit: number): Promise<{ url: string; next: () => Promise<Buffer | Error> }> {
  const results: ((v: Buffer | Error) => void)[] = [];
  server = http.createServer((req, res) => {
    readBodyBytes(req, limit).then(
      (b) => results.shift()?.(b),
      (e: Error) => results.shift()?.(e),
    );
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, next: () => new Promise((r) => results.push(r)) };
}

/** Sends `body` in `parts` writes, each after the server has had time to read the last. */
async function send(url: string, body: Buffer, parts: number, chunked = false): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: chunked ? {} : { 'content-length': body.length } }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    const step = Math.ceil(body.length / parts);
    let at = 0;
    const write = () => {
      if (at >= body.length) return void req.end();
      req.write(body.subarray(at, (at += step)));
      setTimeout(write, 5);
    };
    write();
  });
}

it('a body with a Content-Length arrives in one buffer of that length, written in place: no chunks joined', async () => {
  const { url, next } = await reader(64 * 1024 * 1024);
  const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'é'.repeat(3 * 1024 * 1024) }] }));
  const concat = vi.spyOn(Buffer, 'concat');
  const alloc = vi.spyOn(Buffer, 'allocUnsafeSlow');
  const got = next();
  await send(url, body, 16);
  const bytes = (await got) as Buffer;
  expect(bytes.equals(body)).toBe(true);
  expect(concat).not.toHaveBeenCalled();
  // One allocation, of exactly the declared length, is all the body occupies.
  expect(alloc.mock.calls.filter(([n]) => n === body.length)).toHaveLength(1);
  expect(bytes.buffer.byteLength).toBe(body.length);
});

it('a chunked body (no declared length) is still read whole, and limits and UTF-8 still hold', async () => {
  const { url, next } = await reader(1024);
  const body = Buffer.from(JSON.stringify({ a: 'x'.repeat(500) }));
  let got = next();
  await send(url, body, 4, true);
  expect(((await got) as Buffer).equals(body)).toBe(true);

  got = next();
  await send(url, Buffer.alloc(2000, 0x61), 4, true);
  expect(((await got) as Error).message).toMatch(/exceeds 1024 bytes/);

  got = next();
  await send(url, Buffer.alloc(2000, 0x61), 4);
  expect(((await got) as Error).message).toMatch(/exceeds 1024 bytes/);

  got = next();
  await send(url, Buffer.from([0x7b, 0xff, 0x7d]), 1);
  expect(((await got) as Error).message).toMatch(/not valid UTF-8/);
});
