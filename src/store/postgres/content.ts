import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import type { PgQueryable, Postgres } from './client.js';
import { PgRow } from './rows.js';

/**
 * Content-addressed files in the shared store (migration 6): a task's workspace folder, local git
 * repository or Harbor task folder, packed by the coordinator (rollout/queue/task-content.ts), for
 * workers that do not see its disk. A file is named by the sha256 of its bytes and stored once, in
 * chunks (a row of hundreds of MiB would be built whole in memory on both sides); its `polar_content`
 * row is written last, in the chunks' transaction, so a digest listed there is whole.
 */

/** One chunk's bytes: small enough to hold a few in memory, large enough that a 256 MiB file is 64 rows. */
export const CHUNK_BYTES = 4 * 1024 ** 2;

/** Whether the store holds `digest` whole; its size in bytes, or null. */
export async function contentSize(pg: PgQueryable, digest: string): Promise<number | null> {
  const row = (await pg.query(`SELECT size FROM polar_content WHERE digest = $1`, [digest])).rows[0];
  return row ? new PgRow(row, 'polar_content').number('size') : null;
}

/**
 * Stores `file` (whose sha256 the caller computed as `digest`) unless the store already holds it;
 * true when it wrote it. Two coordinators storing the same digest at once both succeed (the second
 * writes nothing).
 */
export async function putContent(pg: Postgres, digest: string, file: string, size: number): Promise<boolean> {
  if ((await contentSize(pg, digest)) !== null) return false;
  return pg.transaction(async (tx) => {
    // One writer per digest: the other waits here, then finds it stored.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`polar-content:${digest}`]);
    if ((await contentSize(tx, digest)) !== null) return false;
    const handle = await fs.open(file, 'r');
    try {
      const buf = Buffer.alloc(CHUNK_BYTES);
      for (let seq = 0, at = 0; at < size; seq++) {
        const { bytesRead } = await handle.read(buf, 0, Math.min(CHUNK_BYTES, size - at), at);
        if (bytesRead === 0) throw new Error(`${file} ended at ${at} bytes of ${size}`);
        await tx.query(`INSERT INTO polar_content_chunks (digest, seq, bytes) VALUES ($1, $2, $3)`, [digest, seq, buf.subarray(0, bytesRead)]);
        at += bytesRead;
      }
    } finally {
      await handle.close();
    }
    await tx.query(`INSERT INTO polar_content (digest, size, created_at) VALUES ($1, $2, $3)`, [digest, size, Date.now()]);
    return true;
  });
}

/**
 * Why content cannot be had by any worker (not in the store, or not the bytes its digest names):
 * what a worker says when it ends the sample. Anything this worker alone cannot do (its own cap,
 * a full disk) is another error, and the sample goes back to the queue for another worker.
 */
export class ContentUnavailable extends Error {
  override name = 'ContentUnavailable';
}

/** Content larger than this worker's POLAR_CONTENT_MAX_MB: another worker, with a larger cap, may take it. */
export class ContentOverCap extends Error {
  override name = 'ContentOverCap';
}

/**
 * Writes `digest`'s bytes to `file`, chunk by chunk, and checks them against the digest before
 * returning: stored bytes that changed (a row edited, a chunk lost) are refused, never used.
 * Refuses, before reading any chunk, content over `maxBytes` (ContentOverCap).
 */
export async function readContent(pg: PgQueryable, digest: string, file: string, maxBytes: number): Promise<number> {
  const size = await contentSize(pg, digest);
  if (size === null) throw new ContentUnavailable(`content ${short(digest)} is not in the shared store (enqueued into another database, or deleted)`);
  if (size > maxBytes) throw new ContentOverCap(`content ${short(digest)} is ${mb(size)}, over this worker's cap of ${mb(maxBytes)} (POLAR_CONTENT_MAX_MB)`);
  const hash = createHash('sha256');
  const out = await fs.open(file, 'w');
  let written = 0;
  try {
    // One chunk per query: a whole file in one result would be held in memory at once.
    for (let seq = 0; written < size; seq++) {
      const row = (await pg.query(`SELECT bytes FROM polar_content_chunks WHERE digest = $1 AND seq = $2`, [digest, seq])).rows[0];
      if (!row) break;
      const bytes = row.bytes as Buffer;
      written += bytes.length;
      if (written > size) break;
      hash.update(bytes);
      await out.write(bytes);
    }
  } finally {
    await out.close();
  }
  const got = hash.digest('hex');
  if (written !== size || got !== digest)
    throw new ContentUnavailable(
      `content ${short(digest)} in the shared store does not match its digest (${written} bytes of ${size}, sha256 ${short(got)}): it was changed or cut short after it was stored; enqueue the rollout again`,
    );
  return size;
}

function short(digest: string): string {
  return `sha256:${digest.slice(0, 12)}`;
}

function mb(bytes: number): string {
  return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}
