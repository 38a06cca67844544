import type { TestPostgres } from '../postgres.js';
import { cableOf, type HostWorker, killHost, setCable } from './hosts.js';
import type { Observer } from './observe.js';

/**
 * The three faults, each when it hurts: PostgreSQL stopped and started again while unfaulted hosts
 * run samples; then a host SIGKILLed while it runs a sample whose first model call the server
 * answered (after the restart, so its reboot does not meet the outage: a worker started during one
 * is its own case); and, at any time, a host cut off while it runs one, for longer than a lease.
 * Each records what it hit, so the checks can tell a fault's damage (a re-run, a cut call) from a
 * fault of polar's.
 */
export interface FaultRecord {
  kind: 'kill' | 'cut' | 'pg-restart';
  /** Host index (kill, cut). */
  host?: number;
  at: number;
  endedAt?: number;
  /** The samples the host was running when the fault hit, with their attempt then, and their sessions. */
  samples: { id: string; attempt: number }[];
  sessions: string[];
  /** cut: the lease it outlasted (s). */
  leaseS?: number;
  note?: string;
}

export interface FaultPlan {
  pg: TestPostgres;
  observer: Observer;
  workers: () => HostWorker[];
  /** How many calls of this session the mock server answered. */
  answered: (session: string) => number;
  /** Calls the agent makes in all: a sample with some but fewer answered has its agent mid-run. */
  calls: number;
  pgDownS: number;
  /** How often the fleet looks for expired leases (POLAR_QUEUE_SUPERVISE_S), seconds. */
  superviseS: number;
  /** Restarts a killed host's worker (same folders: its journal ships). */
  restart: (index: number) => HostWorker;
  done: () => boolean;
  log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Running = { id: string; session_id: string; attempt: number };

/** Polls until one of `hosts` runs a sample whose agent is mid-run (a call answered, not all); null when the run ended first. */
async function busy(p: FaultPlan, hosts: readonly number[]): Promise<Running[] | null> {
  while (!p.done()) {
    for (const i of hosts) {
      const running = await p.observer.runningOn(p.workers()[i]!.name);
      if (running.some((r) => p.answered(r.session_id) > 0 && p.answered(r.session_id) < p.calls)) return running;
    }
    await sleep(150);
  }
  return null;
}

const hit = (kind: FaultRecord['kind'], running: Running[], host?: number): FaultRecord => ({
  kind,
  ...(host !== undefined ? { host } : {}),
  at: Date.now(),
  samples: running.map((r) => ({ id: r.id, attempt: r.attempt })),
  sessions: running.map((r) => r.session_id),
});

const missed = (kind: FaultRecord['kind'], host?: number): FaultRecord => ({
  kind,
  ...(host !== undefined ? { host } : {}),
  at: Date.now(),
  samples: [],
  sessions: [],
  note: `not applied: ${host !== undefined ? `host ${host}` : 'no unfaulted host'} ran no sample with an answered call before the end (more samples: --per-host)`,
});

/** PostgreSQL stopped for `pgDownS` once a host other than `faulted` runs a sample with an answered call. */
export async function pgRestartFault(p: FaultPlan, faulted: readonly number[]): Promise<FaultRecord> {
  const others = p.workers().filter((w) => !faulted.includes(w.index));
  const running = await busy(
    p,
    others.map((w) => w.index),
  );
  if (!running) return missed('pg-restart');
  const record = hit('pg-restart', running);
  p.log(`fault: PostgreSQL stopped (unfaulted hosts running ${record.samples.map((s) => s.id).join(', ')})`);
  await p.pg.stop();
  await sleep(p.pgDownS * 1000);
  await p.pg.start();
  record.endedAt = Date.now();
  p.log(`fault: PostgreSQL started again after ${((record.endedAt - record.at) / 1000).toFixed(1)} s`);
  return record;
}

export async function killFault(p: FaultPlan, index: number): Promise<FaultRecord> {
  const running = await busy(p, [index]);
  if (!running) return missed('kill', index);
  const victim = p.workers()[index]!;
  victim.killed = true;
  const killed = killHost(victim);
  const record = hit('kill', running, index);
  p.log(`fault: host ${index} SIGKILLed (${killed} processes) running ${record.samples.map((s) => s.id).join(', ')}`);
  // Back after a moment, as a rebooted machine: the same folders, so its journal's calls ship.
  await sleep(3000);
  const again = p.restart(index);
  while (!again.ready && again.child.exitCode === null && again.child.signalCode === null && !p.done()) await sleep(150);
  record.endedAt = Date.now();
  p.log(`fault: host ${index} restarted (${again.ready ? 'ready' : `not ready yet: ${again.child.exitCode ?? again.child.signalCode ?? 'the run ended'}`})`);
  return record;
}

/** The lease the queue gives a sample (pg-boss's heartbeat_seconds on its job rows), in seconds. */
async function leaseSeconds(p: FaultPlan): Promise<number> {
  const [row] = await p.observer.query<{ s: number | null }>(`SELECT max(heartbeat_seconds)::int AS s FROM pgboss.job`).catch(() => [{ s: null }]);
  return row?.s ?? 30;
}

export async function cutFault(p: FaultPlan, index: number): Promise<FaultRecord> {
  const running = await busy(p, [index]);
  if (!running) return missed('cut', index);
  const lease = await leaseSeconds(p);
  const cable = cableOf(p.workers()[index]!.name);
  setCable(cable, false);
  const record = { ...hit('cut', running, index), leaseS: lease };
  // Well past the lease: the last touch may be a beat (≤ lease/6) before the cut, and only the
  // next pass for expired leases hands the sample on (every POLAR_QUEUE_SUPERVISE_S, 30 s by default).
  const downMs = (lease + p.superviseS + 10) * 1000;
  p.log(`fault: host ${index} cut off for ${downMs / 1000} s (lease ${lease} s) running ${record.samples.map((s) => s.id).join(', ')}`);
  await sleep(downMs);
  setCable(cable, true);
  record.endedAt = Date.now();
  p.log(`fault: host ${index} reconnected`);
  return record;
}
