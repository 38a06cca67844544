import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PolarError, UpstreamStatusError } from '../core/errors.js';
import { UpstreamHttp } from './http.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server whose handler decides per request, given how many requests the socket carried before. */
async function serve(
  handle: (req: http.IncomingMessage, res: http.ServerResponse, earlierOnSocket: number) => void,
): Promise<{ url: string; connections: () => number }> {
  const seen = new WeakMap<object, number>();
  let connections = 0;
  const server = http.createServer((req, res) => {
    const n = seen.get(req.socket) ?? 0;
    seen.set(req.socket, n + 1);
    req.resume();
    req.on('end', () => handle(req, res, n));
  });
  server.on('connection', () => connections++);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections };
}

describe('UpstreamHttp', () => {
  it('sends a request again when the kept-alive socket it reused was closed by the server', async () => {
    // The server serves one request per connection and resets the socket when a second arrives on
    // it: what uvicorn's idle timeout does when it fires just as the socket is reused.
    const upstream = await serve((req, res, earlier) => {
      if (earlier > 0) req.socket.destroy();
      else res.end(JSON.stringify({ ok: true }));
    });
    const client = new UpstreamHttp({ baseUrl: upstream.url });
    for (let i = 0; i < 3; i++) {
      const reply = await client.postJson('/v1/chat/completions', Buffer.from('{"a":"é"}'));
      expect(JSON.parse(reply.text)).toEqual({ ok: true });
    }
    expect(upstream.connections()).toBe(3);
    await client.close();
  });

  it('does not resend a request that failed on a fresh connection', async () => {
    let requests = 0;
    const upstream = await serve((req) => {
      requests++;
      req.socket.destroy();
    });
    const client = new UpstreamHttp({ baseUrl: upstream.url });
    const err = await client.postJson('/v1/chat/completions', '{}').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolarError);
    expect((err as PolarError).code).toBe('POLAR_UPSTREAM_CONNECT');
    expect(requests).toBe(1);
    await client.close();
  });

  it('hands each whole reply to its reader, when replies in several chunks arrive interleaved', async () => {
    // Each reply is written in three parts, a turn apart, so concurrent replies' chunks interleave;
    // sizes grow past the reused buffer's and past its cap, and a character is split between chunks.
    const sizes = [300, 70_000, 20_000, 200_000, 2_500_000, 90_000];
    const bodyFor = (i: number) => `{"i":${i},"t":"${'ü€'.repeat(Math.floor(sizes[i]! / 5))}"}`;
    const upstream = await serve((req, res) => {
      const bytes = Buffer.from(bodyFor(Number(req.url!.slice(1))));
      const cuts = [Math.floor(bytes.length / 3) + 1, Math.floor((2 * bytes.length) / 3)];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(bytes.subarray(0, cuts[0]));
      setTimeout(() => {
        res.write(bytes.subarray(cuts[0], cuts[1]));
        setTimeout(() => res.end(bytes.subarray(cuts[1])), 5);
      }, 5);
    });
    const client = new UpstreamHttp({ baseUrl: upstream.url });
    for (let round = 0; round < 2; round++) {
      const read = await Promise.all(sizes.map((_, i) => client.postAndRead(`/${i}`, '{}', undefined, undefined, (bytes) => bytes.toString('utf8'))));
      read.forEach((text, i) => expect(text).toBe(bodyFor(i)));
    }
    await client.close();
  });

  it('throws a non-2xx reply read in several chunks as the status error, with its whole text', async () => {
    const text = `{"error":{"message":"${'x'.repeat(100_000)}"}}`;
    const upstream = await serve((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.write(text.slice(0, 1000));
      setTimeout(() => res.end(text.slice(1000)), 5);
    });
    const client = new UpstreamHttp({ baseUrl: upstream.url });
    const err = await client.postAndRead('/v1/chat/completions', '{}', undefined, undefined, () => 'read').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamStatusError);
    expect((err as UpstreamStatusError).upstreamStatus).toBe(400);
    expect((err as UpstreamStatusError).upstreamBody).toBe(text);
    await client.close();
  });
});
