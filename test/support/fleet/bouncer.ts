import net from 'node:net';
import { startPgBouncer, type TestPgBouncer } from '../pgbouncer.js';

/**
 * PgBouncer (transaction mode, test/support/pgbouncer.ts) in front of the fleet's PostgreSQL.
 * It listens on loopback only, so a relay on the bridge address carries the hosts' connections to
 * it and counts them by host: behind PgBouncer, pg_stat_activity sees PgBouncer, not the hosts.
 */
export interface FleetBouncer {
  /** A hosts' URL (on the bridge) through the relay to PgBouncer, for `directHostUrl`'s database. */
  hostUrl(directHostUrl: string): string;
  /** Most connections each host held through PgBouncer at once, by address. */
  maxByHost: Map<string, number>;
  close(): Promise<void>;
}

export async function startFleetBouncer(directUrl: string, hub: string, poolSize: number): Promise<FleetBouncer> {
  const bouncer: TestPgBouncer = await startPgBouncer(directUrl, { poolSize, maxClientConn: 2000 });
  const target = new URL(bouncer.url(directUrl));
  const open = new Map<string, number>();
  const maxByHost = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const from = (client.remoteAddress ?? '?').replace(/^::ffff:/, '');
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) sockets.add(s);
    open.set(from, (open.get(from) ?? 0) + 1);
    maxByHost.set(from, Math.max(maxByHost.get(from) ?? 0, open.get(from)!));
    let closed = false;
    const end = () => {
      if (closed) return;
      closed = true;
      open.set(from, (open.get(from) ?? 1) - 1);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve, reject) => {
    relay.once('error', reject);
    relay.listen(0, hub, () => resolve());
  });
  const port = (relay.address() as net.AddressInfo).port;
  return {
    hostUrl: (directHostUrl) => {
      const u = new URL(directHostUrl);
      u.port = String(port);
      return u.toString();
    },
    maxByHost,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => relay.close(() => r()));
      await bouncer.close();
    },
  };
}
