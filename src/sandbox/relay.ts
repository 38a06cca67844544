import { chmodSync, rmSync } from 'node:fs';
import net from 'node:net';

/**
 * A Unix socket that pipes each connection to a TCP address: how a sandbox without network reaches
 * a proxy that runs in another process (`polar run --proxy URL`). The socket is made 0600.
 */
export async function startRelay(socketPath: string, host: string, port: number): Promise<{ close(): Promise<void> }> {
  rmSync(socketPath, { force: true });
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host);
    open.add(client).add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(socketPath, 0o600);
  return {
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(socketPath, { force: true });
    },
  };
}
