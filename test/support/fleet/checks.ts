import { unpackFloat64, unpackUint32 } from '../../../src/core/token-packing.js';
import type { LoggedCall } from '../../../src/mock-server/server.js';
import type { FaultRecord } from './faults.js';
import type { Attempt } from './observe.js';

/** One verdict of the fleet check: its name, whether it held, and what says so (or what broke it). */
export interface Check {
  name: string;
  ok: boolean;
  detail: string[];
}

export interface SampleRow {
  id: string;
  task_id: string;
  status: string;
  reward: number | null;
  attempt: string;
  worker: string | null;
  error: string | null;
}

export interface CallRow {
  id: string;
  session_id: string;
  status: string;
  token_source: string;
  sampled_ids: Buffer | null;
  logprobs: Buffer | null;
}

/** A worker incarnation's `--json` sample ends, with the host and pid that printed them. */
export interface WorkerEnds {
  host: number;
  pid: number;
  hostname: string;
  ended: Record<string, unknown>[];
}

export interface Coordinator {
  what: string;
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

const FINAL = ['completed', 'failed', 'timeout', 'error'];
const clip = (s: string, n = 200) => (s.length > n ? `${s.slice(0, n)}…` : s);

export function coordinatorCheck(coords: Coordinator[]): Check {
  const detail: string[] = [];
  let ok = true;
  for (const c of coords) {
    let summary: Record<string, unknown> | null = null;
    try {
      // --json prints the summary as one indented object, after nothing else on stdout.
      summary = JSON.parse(c.stdout.slice(c.stdout.indexOf('{'))) as Record<string, unknown>;
    } catch {
      /* no summary */
    }
    const good = c.code === 0 && summary?.status === 'completed';
    ok &&= good;
    detail.push(
      `${c.what}: ${c.signal ? `killed by ${c.signal}` : `exit ${c.code}`}${summary?.status ? `, status ${String(summary.status)}` : summary?.error ? `, error ${JSON.stringify(summary.error)}` : ', no JSON summary'}${good ? '' : `; stderr: ${clip(c.stderr.trim().split('\n').slice(-3).join(' | '), 400)}`}`,
    );
  }
  return { name: 'coordinator alive, exit 0, rollout completed', ok, detail };
}

export function onceCheck(samples: SampleRow[], expected: number, workers: WorkerEnds[]): Check {
  const detail: string[] = [];
  if (samples.length !== expected) detail.push(`${samples.length} sample rows, ${expected} expected`);
  const open = samples.filter((s) => !FINAL.includes(s.status));
  if (open.length > 0) detail.push(`not ended: ${open.map((s) => `${s.id} (${s.status})`).join(', ')}`);
  // Each end a worker printed as final; more than one for a sample: two hosts both believed they ended it.
  const claims = new Map<string, string[]>();
  for (const w of workers)
    for (const e of w.ended)
      if (FINAL.includes(String(e.outcome)))
        claims.set(String(e.sampleId), [...(claims.get(String(e.sampleId)) ?? []), `${w.hostname}/${w.pid} (${String(e.outcome)})`]);
  for (const s of samples) {
    const c = claims.get(s.id) ?? [];
    if (c.length > 1) detail.push(`${s.id} ended on ${c.length} workers: ${c.join(', ')} (the store kept ${s.worker})`);
    if (FINAL.includes(s.status) && c.length === 0) detail.push(`${s.id} ended in the store (${s.worker}) but no worker said it ended it`);
  }
  const ok = detail.length === 0;
  if (ok) detail.push(`${samples.length} samples, each ended once (by one worker's account and the store's)`);
  return { name: 'every sample ended exactly once', ok, detail };
}

export function rewardCheck(samples: SampleRow[], rewards: Record<string, number>): Check {
  const detail: string[] = [];
  for (const s of samples) {
    if (s.status !== 'completed') detail.push(`${s.id}: ${s.status}${s.error ? `: ${clip(s.error)}` : ''}`);
    else if (s.reward !== rewards[s.task_id]) detail.push(`${s.id}: reward ${s.reward}, expected ${rewards[s.task_id]}`);
  }
  const ok = detail.length === 0 && samples.length > 0;
  if (ok) detail.push(`${samples.length} samples completed, every reward the one its task's workspace pays`);
  return { name: 'every sample completed, rewards right', ok, detail };
}

export function groupCheck(groups: { task_id: string; samples: string; mean: number | null }[], rewards: Record<string, number>, group: number): Check {
  const detail: string[] = [];
  for (const [task, r] of Object.entries(rewards)) {
    const g = groups.find((x) => x.task_id === task);
    if (!g) detail.push(`${task}: no group row`);
    else if (Number(g.samples) !== group || g.mean !== r) detail.push(`${task}: ${g.samples} samples, mean ${g.mean}; expected ${group}, ${r}`);
  }
  const ok = detail.length === 0;
  if (ok) detail.push(`${Object.keys(rewards).length} groups of ${group}, each mean its task's reward`);
  return { name: 'every group whole, once', ok, detail };
}

/**
 * Calls in PostgreSQL against the model server's log. Each stored complete call (status ok) must
 * be one reply the server sampled for that session, ids and logprobs bit for bit, each reply used
 * once. A reply not stored complete is allowed only in a session a fault hit, and only with a
 * stored partial call (not ok) in that session to account for it.
 */
export function callsCheck(calls: CallRow[], served: readonly LoggedCall[], faulted: readonly FaultRecord[]): Check {
  const detail: string[] = [];
  const hitSessions = new Set(faulted.filter((f) => f.kind !== 'pg-restart').flatMap((f) => f.sessions));
  const bySession = new Map<string, LoggedCall[]>();
  for (const m of served) {
    const s = String(m.headers['x-polar-session'] ?? '');
    bySession.set(s, [...(bySession.get(s) ?? []), m]);
  }
  const claimed = new Set<LoggedCall>();
  const key = (ids: readonly number[] | null, lp: readonly number[] | null) =>
    `${(ids ?? []).join(',')}|${(lp ?? []).map((x) => (Object.is(x, -0) ? '-0' : String(x))).join(',')}`;
  let matched = 0;
  const ok = calls.filter((c) => c.status === 'ok');
  for (const c of ok) {
    const want = key(unpackUint32(c.sampled_ids), unpackFloat64(c.logprobs));
    const found = (bySession.get(c.session_id) ?? []).find((m) => !claimed.has(m) && key(m.reply.ids, m.reply.logprobs) === want);
    if (!found) {
      const elsewhere = served.find((m) => !claimed.has(m) && key(m.reply.ids, m.reply.logprobs) === want);
      detail.push(
        `stored call ${c.id} (session ${c.session_id}, ${c.token_source}) matches no reply the server sent ${elsewhere ? 'in its session (it matches one of another session)' : 'at all'}`,
      );
      continue;
    }
    claimed.add(found);
    matched++;
  }
  const partial = new Map<string, number>();
  for (const c of calls) if (c.status !== 'ok') partial.set(c.session_id, (partial.get(c.session_id) ?? 0) + 1);
  const unstored = new Map<string, number>();
  for (const m of served) {
    if (claimed.has(m)) continue;
    const s = String(m.headers['x-polar-session'] ?? '');
    unstored.set(s, (unstored.get(s) ?? 0) + 1);
  }
  let cut = 0;
  for (const [s, n] of unstored) {
    if (hitSessions.has(s) && n <= (partial.get(s) ?? 0)) {
      cut += n;
      continue;
    }
    detail.push(
      `${n} repl${n === 1 ? 'y' : 'ies'} the server sent in session ${s || '(none named)'} ${n === 1 ? 'is' : 'are'} not stored as a complete call${hitSessions.has(s) ? ` (a faulted session with ${partial.get(s) ?? 0} partial calls stored)` : ' (no fault hit this session)'}`,
    );
  }
  const good = detail.length === 0;
  detail.unshift(`${served.length} replies served, ${ok.length} complete calls stored, ${matched} matched; ${cut} cut by a fault and stored as partial`);
  return { name: 'calls in PostgreSQL == calls the model server saw', ok: good, detail };
}

/**
 * No lease lost on a host without a fault: every attempt but a sample's last must have run on a
 * host a fault hit, in a session it hit. An attempt never seen (the poll missed it) counts against.
 */
export function leaseCheck(
  samples: SampleRow[],
  attempts: ReadonlyMap<string, Attempt>,
  faults: readonly FaultRecord[],
  hostOf: (worker: string) => number | null,
): Check {
  const detail: string[] = [];
  const hit = new Set(faults.filter((f) => f.kind !== 'pg-restart').flatMap((f) => f.sessions));
  const reruns: string[] = [];
  for (const s of samples) {
    const last = Number(s.attempt);
    for (let k = 1; k < last; k++) {
      const a = attempts.get(`${s.id}#${k}`);
      if (!a) {
        detail.push(`${s.id}: attempt ${k} of ${last} was never seen running (host unknown)`);
        continue;
      }
      const host = hostOf(a.worker);
      if (a.session && hit.has(a.session)) reruns.push(`${s.id} (attempt ${k} on host ${host}, faulted)`);
      else detail.push(`${s.id}: attempt ${k} on host ${host ?? a.worker} (${a.statuses.join('→')}) lost its lease with no fault on that host`);
    }
  }
  const ok = detail.length === 0;
  detail.unshift(
    `${samples.filter((s) => Number(s.attempt) === 1).length} of ${samples.length} samples ran once; re-runs after a fault: ${reruns.length ? reruns.join(', ') : 'none'}`,
  );
  return { name: 'no lease lost on a host without a fault', ok, detail };
}

export function faultsCheck(faults: readonly FaultRecord[], samples: SampleRow[], hostOf: (worker: string) => number | null): Check {
  let ok = faults.every((f) => !f.note);
  const detail = faults.map(
    (f) =>
      `${f.kind}${f.host !== undefined ? ` host ${f.host}` : ''}: ${f.note ?? `hit ${f.samples.length} running sample(s)${f.endedAt ? `, ${((f.endedAt - f.at) / 1000).toFixed(1)} s` : ''}${f.leaseS ? ` (lease ${f.leaseS} s)` : ''}`}`,
  );
  // Past its lease, a cut-off or dead host's samples belong to the queue again: a later attempt ended them (issue 43, item 1).
  for (const f of faults.filter((x) => x.kind === 'cut' || x.kind === 'kill')) {
    for (const at of f.samples) {
      const s = samples.find((x) => x.id === at.id);
      const host = s?.worker ? hostOf(s.worker) : null;
      const taken = s !== undefined && Number(s.attempt) > at.attempt;
      ok &&= taken;
      detail.push(
        `${at.id} (${f.kind} on host ${f.host}, attempt ${at.attempt}): ${taken ? `taken back, ended on host ${host} in attempt ${s!.attempt}` : `NOT taken back: ended in attempt ${s?.attempt ?? '?'} on host ${host ?? s?.worker ?? '?'} (${s?.status ?? 'missing'})`}`,
      );
    }
  }
  return { name: "every fault applied mid-sample; the faulted hosts' samples taken back", ok, detail };
}

/** Every worker but the one SIGKILLed was running when the rollout ended and exited 0 when stopped. */
export function workersCheck(
  workers: { host: number; pid: number; killed: boolean; aliveAtEnd: boolean; code: number | null; signal: string | null; tail: string }[],
): Check {
  const detail: string[] = [];
  for (const w of workers) {
    if (w.killed) continue;
    if (!w.aliveAtEnd) detail.push(`host ${w.host} (pid ${w.pid}) had exited before the rollout ended (${w.signal ?? `exit ${w.code}`}): ${clip(w.tail, 300)}`);
    else if (w.code !== 0) detail.push(`host ${w.host} (pid ${w.pid}) exited ${w.signal ?? w.code} when stopped: ${clip(w.tail, 300)}`);
  }
  const ok = detail.length === 0;
  if (ok) detail.push(`${workers.filter((w) => !w.killed).length} workers alive to the end, each exited 0 when stopped`);
  return { name: 'every worker survived the faults', ok, detail };
}

/**
 * Each host within its connection budget: its pool (POLAR_PG_POOL, 4 by default), one LISTEN
 * connection and one heartbeat connection while it runs samples (`polar worker --help`). Behind
 * PgBouncer the pooled ones are counted at the relay, the direct ones (LISTEN) in pg_stat_activity;
 * each host's two peaks are added, which can only overstate it.
 */
export function budgetCheck(hosts: { host: number; direct: number; pooled: number }[], budget: number, bouncer: boolean): Check {
  const over = hosts.filter((h) => h.direct + h.pooled > budget);
  const most = Math.max(0, ...hosts.map((h) => h.direct + h.pooled));
  const detail = over.map(
    (h) => `host ${h.host}: ${h.direct + h.pooled} connections${bouncer ? ` (${h.pooled} through PgBouncer, ${h.direct} direct)` : ''}, budget ${budget}`,
  );
  detail.unshift(`most held by one host: ${most}; budget ${budget} (pool + LISTEN + heartbeat)${bouncer ? ', through PgBouncer in transaction mode' : ''}`);
  return { name: 'every host within its PostgreSQL connection budget', ok: over.length === 0, detail };
}
