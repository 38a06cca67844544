import type pg from 'pg';
import { newId } from '../../core/ids.js';
import type { PauseGate } from '../../proxy/pause.js';
import type { Postgres } from '../../store/postgres/client.js';
import { APP_PREFIX, CHANNEL, inferenceControl, reportWorkerInference } from '../../store/postgres/inference.js';
import { JOBS_CHANNEL } from './notify.js';

/** How long a worker waits for its calls in flight to end after a pause before it says so anyway. */
const DRAIN_MS = 15 * 60_000;
/** After a lost connection (PostgreSQL restarted), the next try. */
const RECONNECT_MS = 1000;

/**
 * A worker's side of the fleet's inference pause (store/postgres/inference.ts): on a connection of
 * its own that LISTENs, named by the worker's key so the coordinator sees it alive, it applies each
 * pause or resume to its capture proxy's PauseGate and reports the epoch it applied and the calls
 * still running, again once they have drained. The state is read on connecting, so a worker that
 * starts (or reconnects) while the fleet is paused holds its calls too. Costs no transaction while
 * nothing changes.
 *
 * The same connection hears "jobs queued" (notify.ts) for `onJobs`, so a worker needs one LISTEN
 * connection, not two; `onJobs(null)` after each (re)connect, since notifications sent while it was
 * away are lost. It must reach PostgreSQL itself: behind PgBouncer in transaction mode a LISTEN
 * hears nothing (the worker's --listen-url).
 */
export class InferenceFollower {
  private readonly key = newId('wrk');
  private client: pg.Client | null = null;
  private connecting: pg.Client | null = null;
  private closed = false;
  private reconnecting = false;
  private applied = -1;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly pg: Postgres,
    private readonly gate: PauseGate,
    private readonly worker: string,
    private readonly notice: (line: string) => void,
    private readonly onJobs?: (queue: string | null) => void,
  ) {}

  /** Whether the connection is up and listening now. */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Connects, and keeps reconnecting after a loss until closed; resolves after the first try. */
  async start(): Promise<void> {
    await this.connect().catch((err: unknown) => this.lost(err));
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.chain.catch(() => undefined);
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }

  private async connect(): Promise<void> {
    const client = this.pg.dedicated(`${APP_PREFIX}${this.key}`);
    this.connecting = client;
    client.on('error', (err) => this.lost(err, client));
    client.on('end', () => this.lost(null, client));
    client.on('notification', (msg) => {
      if (msg.channel === JOBS_CHANNEL) this.onJobs?.(msg.payload ?? null);
      else this.apply();
    });
    try {
      await client.connect();
      if (this.closed) {
        await client.end();
        return;
      }
      // LISTEN before reading: a change that commits between the two is read or notified, never missed.
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.onJobs) await client.query(`LISTEN ${JOBS_CHANNEL}`);
    } catch (err) {
      // Never left open: a connection that does not listen would still look like a live worker.
      await client.end().catch(() => undefined);
      throw err;
    } finally {
      if (this.connecting === client) this.connecting = null;
    }
    this.client = client;
    // Said again on every connection: while it was away, the coordinator may have dropped its row.
    this.applied = -1;
    this.apply();
    this.onJobs?.(null);
  }

  private lost(err: unknown, client?: pg.Client): void {
    // A second event of the same loss (error, then end), or an old connection's last events: nothing to do.
    if (this.closed || this.reconnecting) return;
    if (client && client !== this.client && client !== this.connecting) return;
    this.reconnecting = true;
    if (err) this.notice(`inference pause: lost PostgreSQL (${(err as Error).message}); reconnecting`);
    this.client = null;
    setTimeout(() => {
      this.reconnecting = false;
      if (!this.closed && !this.client) void this.connect().catch((e: unknown) => this.lost(e));
    }, RECONNECT_MS).unref();
  }

  /** Reads the fleet's state and applies it, one change at a time. */
  private apply(): void {
    this.chain = this.chain
      .then(async () => {
        const client = this.client;
        if (!client) return;
        const { paused, epoch } = await inferenceControl(client);
        if (epoch === this.applied) return;
        this.applied = epoch;
        if (paused) this.gate.pause();
        else this.gate.resume();
        this.notice(`inference ${paused ? 'paused' : 'resumed'} (epoch ${epoch}): ${this.gate.inFlight} calls in flight`);
        await this.report(epoch, paused);
        if (paused && this.gate.inFlight > 0)
          void this.gate.drained(DRAIN_MS).then(() => {
            if (this.applied === epoch) void this.report(epoch, paused).catch(() => undefined);
          });
      })
      .catch((err: unknown) => this.notice(`inference pause: ${(err as Error).message}`));
  }

  private async report(epoch: number, paused: boolean): Promise<void> {
    const client = this.client;
    if (!client) return;
    await reportWorkerInference(client, { workerKey: this.key, worker: this.worker, epoch, paused, inflight: this.gate.inFlight });
  }
}
