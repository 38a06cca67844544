import type { Db } from './db.js';
import { currentProcess, ownerState, type ProcessIdentity } from './owner.js';

export interface ReconcileResult {
  /** Owners found gone, whose unfinished rows were marked `interrupted`. */
  owners: number;
  calls: number;
  sessions: number;
  /** Rollout samples that were in a stage, and rollouts that were running. */
  samples: number;
  rollouts: number;
}

interface RawOwner {
  id: number;
  host: string;
  pid: number;
  boot_id: string | null;
  start_ticks: number | null;
}

export const NOTHING: ReconcileResult = Object.freeze({ owners: 0, calls: 0, sessions: 0, samples: 0, rollouts: 0 });

export const INTERRUPTED_MESSAGE = 'the polar process serving this call ended before it finished';

/**
 * The processes that write to this database (migration 4). Each writing process registers once;
 * its sessions and calls carry its id. `reconcile` finds owners on this host that ended without
 * closing (killed, crashed, power lost) and marks what they left unfinished `interrupted`, keeping
 * any tokens a streaming call had checkpointed. Rows of a live process are never touched, however
 * old, and rows written from another host are left for a process on that host.
 */
export class OwnersTable {
  private readonly candidatesStmt;
  private readonly interruptCallsStmt;
  private readonly interruptSessionsStmt;
  private readonly interruptSamplesStmt;
  private readonly interruptRolloutsStmt;
  private readonly endOwnerStmt;
  private readonly completeSessionsStmt;
  private readonly insertStmt;
  private readonly reconcileTx;

  constructor(private readonly db: Db) {
    this.insertStmt = db.prepare(`INSERT INTO owners (host, pid, boot_id, start_ticks, started_at, command) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`);
    // Owners that did not close and left something unfinished; both lookups use partial indexes.
    this.candidatesStmt = db.prepare(
      `SELECT o.id, o.host, o.pid, o.boot_id, o.start_ticks FROM owners o
        WHERE o.ended_at IS NULL AND o.id <> ?
          AND (EXISTS (SELECT 1 FROM requests r WHERE r.owner_id = o.id AND r.status = 'in_progress')
               OR EXISTS (SELECT 1 FROM sessions s WHERE s.owner_id = o.id AND s.status = 'active')
               OR EXISTS (SELECT 1 FROM samples x WHERE x.owner_id = o.id AND x.status IN ('init', 'ready', 'running', 'post'))
               OR EXISTS (SELECT 1 FROM rollouts x WHERE x.owner_id = o.id AND x.status = 'running'))`,
    );
    this.interruptCallsStmt = db.prepare(
      `UPDATE requests SET status = 'interrupted', error = COALESCE(error, ?), error_code = COALESCE(error_code, 'POLAR_INTERRUPTED')
        WHERE owner_id = ? AND status = 'in_progress'`,
    );
    this.interruptSessionsStmt = db.prepare(`UPDATE sessions SET status = 'interrupted' WHERE owner_id = ? AND status = 'active'`);
    this.interruptSamplesStmt = db.prepare(`UPDATE samples SET status = 'interrupted' WHERE owner_id = ? AND status IN ('init', 'ready', 'running', 'post')`);
    this.interruptRolloutsStmt = db.prepare(`UPDATE rollouts SET status = 'interrupted', ended_at = ? WHERE owner_id = ? AND status = 'running'`);
    this.completeSessionsStmt = db.prepare(`UPDATE sessions SET status = 'completed', ended_at = ? WHERE owner_id = ? AND status = 'active'`);
    this.endOwnerStmt = db.prepare(`UPDATE owners SET ended_at = ? WHERE id = ?`);
    this.reconcileTx = db.transaction((gone: readonly number[], now: number): ReconcileResult => {
      const out: ReconcileResult = { ...NOTHING };
      for (const id of gone) {
        out.calls += this.interruptCallsStmt.run(INTERRUPTED_MESSAGE, id).changes;
        out.sessions += this.interruptSessionsStmt.run(id).changes;
        out.samples += this.interruptSamplesStmt.run(id).changes;
        out.rollouts += this.interruptRolloutsStmt.run(now, id).changes;
        this.endOwnerStmt.run(now, id);
        out.owners++;
      }
      return out;
    });
  }

  register(identity: ProcessIdentity = currentProcess()): number {
    // all(), not get(): a COMMIT that fails at get()'s reset is not reported (requests.ts begin).
    const [row] = this.insertStmt.all(identity.host, identity.pid, identity.bootId, identity.startTicks, identity.startedAt, identity.command) as {
      id: number;
    }[];
    return row!.id;
  }

  /** Marks what gone owners left unfinished `interrupted`; `self` is never a candidate. */
  reconcile(self: number | null, here: ProcessIdentity = currentProcess()): ReconcileResult {
    const candidates = this.candidatesStmt.all(self ?? -1) as RawOwner[];
    const gone = candidates
      .filter((o) => ownerState({ host: o.host, pid: o.pid, bootId: o.boot_id, startTicks: o.start_ticks }, here) === 'gone')
      .map((o) => o.id);
    if (gone.length === 0) return { ...NOTHING };
    return this.reconcileTx.immediate(gone, Date.now());
  }

  /**
   * A clean close: sessions this process created and never ended are completed, calls it never
   * finished (a close that outran its grace period) are interrupted, and the owner is marked ended.
   */
  close(self: number): void {
    const now = Date.now();
    this.db.transaction(() => {
      this.interruptCallsStmt.run(INTERRUPTED_MESSAGE, self);
      this.completeSessionsStmt.run(now, self);
      this.interruptSamplesStmt.run(self);
      this.interruptRolloutsStmt.run(now, self);
      this.endOwnerStmt.run(now, self);
    })();
  }
}
