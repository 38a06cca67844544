import { chmodSync, rmSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';

/**
 * The proxy's sockets: one HTTP server on a TCP address, optionally also fed by a Unix socket, and
 * closing them so that what was accepted finishes. What a request may do is admission.ts's; what
 * it is answered, server.ts's.
 */

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export interface ListenOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Also serve on this Unix socket (made 0600, removed on close). */
  unixSocket?: string;
}

export interface Listener {
  readonly address: AddressInfo;
  /** `http://host:port`, with an IPv6 address in brackets. */
  readonly url: string;
  /**
   * Stops accepting, lets `tasks` settle (up to `graceMs`), then closes every connection and the
   * Unix socket (removing its file); resolves once the server has closed and `tasks` settled.
   */
  close(graceMs: number, tasks: ReadonlySet<Promise<void>>): Promise<void>;
}

/**
 * Binds the server. `onBound` gets the port before any request can be handled (the host policy
 * needs it when port 0 picked one).
 */
export async function listen(
  options: ListenOptions,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
  onBound: (port: number) => void,
): Promise<Listener> {
  const server = http.createServer({ keepAliveTimeout: 75_000 }, onRequest);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      onBound((server.address() as AddressInfo).port);
      resolve();
    });
  });
  // The same HTTP server handles the socket's connections: one set of routes, checks and drains.
  const unix = options.unixSocket ? await listenUnix(options.unixSocket, (socket) => server.emit('connection', socket)) : undefined;
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    address,
    url: `http://${urlHost}:${address.port}`,
    async close(graceMs, tasks) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const drained = Promise.allSettled([...tasks]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
        timer.unref();
      });
      await Promise.race([drained, timedOut]);
      if (timer) clearTimeout(timer);
      server.closeAllConnections();
      if (unix) {
        await new Promise<void>((resolve) => unix.close(() => resolve()));
        rmSync(options.unixSocket!, { force: true });
      }
      await closed;
      await Promise.allSettled([...tasks]);
    },
  };
}

async function listenUnix(file: string, onConnection: (socket: net.Socket) => void): Promise<net.Server> {
  rmSync(file, { force: true });
  const unix = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    unix.once('error', reject);
    unix.listen(file, () => {
      unix.off('error', reject);
      resolve();
    });
  });
  chmodSync(file, 0o600);
  return unix;
}
