import { PolarError } from '../../core/errors.js';
import type { Postgres } from './client.js';

/**
 * The shared store's schema: the SQLite schema's tables (migrations.ts, as of migration 11) with the
 * same columns and meanings, in PostgreSQL types: INTEGER → BIGINT, REAL → DOUBLE PRECISION (exact
 * float64 round trip), BLOB → BYTEA (token ids and logprobs stay packed binary, never JSON).
 *
 * What differs, and why:
 * - no `owner_id`: owners are per machine (a pid means nothing elsewhere); crash recovery happens
 *   in each machine's journal (owners.ts), whose results are shipped like any other write. Instead
 *   `origin` names the journal a row came from.
 * - no foreign keys and no UNIQUE (session_id, seq): rows arrive from many journals, each in its own
 *   order, and a shipped batch must never be refused for a row another journal has not sent yet.
 * - `_xid`: the transaction that last wrote the row (set by a trigger), so a reader's local mirror
 *   pulls exactly what changed since its last pull (mirror.ts).
 *
 * Both schemas are append-only histories, so neither is generated from the other: a migration added
 * on one side needs its twin here, and test/integration/postgres-schema.test.ts compares the two
 * live schemas column by column (name, type class, nullability, default, CHECK values).
 *
 * Numbered like the SQLite migrations, append only; `polar_meta.schema_version` holds the last one
 * applied, and every step runs in one transaction under an advisory lock so two processes opening a
 * new database at once cannot both apply it.
 */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    created_at      BIGINT NOT NULL,
    ended_at        BIGINT,
    harness         TEXT,
    harness_version TEXT,
    cwd             TEXT,
    upstream_url    TEXT,
    served_model    TEXT,
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'completed', 'failed', 'timeout', 'aborted', 'interrupted')),
    metadata        TEXT NOT NULL DEFAULT '{}',
    origin          TEXT,
    _xid            xid8
  );

  CREATE TABLE requests (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL,
    agent_id            TEXT NOT NULL DEFAULT 'main',
    seq                 BIGINT NOT NULL,
    provider            TEXT NOT NULL,
    method              TEXT NOT NULL,
    path                TEXT NOT NULL,
    started_at          BIGINT NOT NULL,
    ended_at            BIGINT,
    status              TEXT NOT NULL DEFAULT 'in_progress'
                        CHECK (status IN ('in_progress', 'ok', 'error', 'aborted', 'interrupted')),
    http_status         BIGINT,
    streamed            BIGINT NOT NULL DEFAULT 0,
    request_headers     TEXT,
    reply               TEXT,
    error               TEXT,
    error_code          TEXT,
    finish_reason       TEXT,
    usage               TEXT,
    requested_model     TEXT,
    served_model        TEXT,
    token_source        TEXT NOT NULL DEFAULT 'none' CHECK (token_source IN ('upstream', 'none')),
    prompt_ids          BYTEA,
    sampled_ids         BYTEA,
    logprobs            BYTEA,
    prompt_token_count  BIGINT,
    sampled_token_count BIGINT,
    token_error         TEXT,
    assistant_message   TEXT,
    tool_count          BIGINT,
    prompt_render       TEXT CHECK (prompt_render IN ('bridged', 'full')),
    parent_call_id      TEXT,
    render_reason       TEXT,
    rendered_tokens     BIGINT,
    policy_version      TEXT,
    token_digest        TEXT,
    prompt_base         TEXT,
    prompt_base_len     BIGINT,
    origin              TEXT,
    _xid                xid8
  );
  CREATE INDEX requests_session ON requests (session_id, seq);
  CREATE INDEX requests_started ON requests (started_at);

  CREATE TABLE request_bodies (
    request_id       TEXT PRIMARY KEY,
    original_request TEXT,
    upstream_request TEXT,
    original_base    TEXT,
    original_prefix  BIGINT,
    original_suffix  BIGINT,
    upstream_base    TEXT,
    upstream_prefix  BIGINT,
    upstream_suffix  BIGINT,
    origin           TEXT,
    _xid             xid8
  );

  CREATE TABLE rollouts (
    id               TEXT PRIMARY KEY,
    created_at       BIGINT NOT NULL,
    ended_at         BIGINT,
    status           TEXT NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'completed', 'interrupted', 'failed')),
    harness          TEXT NOT NULL,
    upstream_url     TEXT,
    upstream_kind    TEXT,
    served_model     TEXT,
    samples_per_task BIGINT NOT NULL,
    tasks_file       TEXT,
    accept           TEXT,
    config           TEXT NOT NULL DEFAULT '{}',
    origin           TEXT,
    _xid             xid8
  );

  CREATE TABLE rollout_tasks (
    rollout_id TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    position   BIGINT NOT NULL,
    task       TEXT NOT NULL,
    origin     TEXT,
    _xid       xid8,
    PRIMARY KEY (rollout_id, task_id)
  );

  CREATE TABLE samples (
    id            TEXT PRIMARY KEY,
    rollout_id    TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    sample_index  BIGINT NOT NULL,
    group_id      TEXT NOT NULL,
    attempt       BIGINT NOT NULL DEFAULT 0,
    session_id    TEXT,
    status        TEXT NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'init', 'ready', 'running', 'post',
                                    'completed', 'failed', 'timeout', 'error', 'interrupted')),
    error_stage   TEXT,
    error         TEXT,
    reward        DOUBLE PRECISION,
    trace_rewards TEXT,
    evaluator     TEXT,
    diff          TEXT,
    accepted      BIGINT,
    advantage     DOUBLE PRECISION,
    loo_advantage DOUBLE PRECISION,
    timing        TEXT NOT NULL DEFAULT '{}',
    started_at    BIGINT,
    ended_at      BIGINT,
    worker        TEXT,
    origin        TEXT,
    _xid          xid8
  );
  CREATE INDEX samples_rollout ON samples (rollout_id, task_id, sample_index);
  CREATE INDEX samples_session ON samples (session_id);

  CREATE TABLE groups (
    rollout_id   TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    group_id     TEXT NOT NULL,
    samples      BIGINT NOT NULL,
    rewarded     BIGINT NOT NULL,
    mean         DOUBLE PRECISION,
    std          DOUBLE PRECISION,
    accepted     BIGINT NOT NULL DEFAULT 0,
    completed_at BIGINT NOT NULL,
    origin       TEXT,
    _xid         xid8,
    PRIMARY KEY (rollout_id, task_id)
  );

  CREATE FUNCTION polar_touch() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    NEW._xid := pg_current_xact_id();
    RETURN NEW;
  END $$;
  ${['sessions', 'requests', 'request_bodies', 'rollouts', 'rollout_tasks', 'samples', 'groups']
    .map(
      (t) => `CREATE TRIGGER ${t}_touch BEFORE INSERT OR UPDATE ON ${t} FOR EACH ROW EXECUTE FUNCTION polar_touch();
  CREATE INDEX ${t}_xid ON ${t} (_xid);`,
    )
    .join('\n  ')}
  `,
  // 2 (SQLite migration 10): calls a proxy with session keys refused, never filed in a session.
  `
  CREATE TABLE audit (
    id              TEXT PRIMARY KEY,
    at              BIGINT NOT NULL,
    method          TEXT NOT NULL,
    path            TEXT NOT NULL,
    claimed_session TEXT,
    reason          TEXT NOT NULL,
    remote          TEXT,
    request_headers TEXT,
    origin          TEXT,
    _xid            xid8
  );
  CREATE INDEX audit_at ON audit (at);
  CREATE TRIGGER audit_touch BEFORE INSERT OR UPDATE ON audit FOR EACH ROW EXECUTE FUNCTION polar_touch();
  CREATE INDEX audit_xid ON audit (_xid);
  `,
  // 3 (SQLite migration 11): each call's sampling record (upstream/sampling-policy.ts), as JSON text.
  `ALTER TABLE requests ADD COLUMN sampling TEXT;`,
  // 4: the store's identity, so a reader's mirror (mirror.ts) can tell a database dropped and made
  // again at the same URL, or another server there, from the one it copied.
  `INSERT INTO polar_meta (key, value) VALUES ('store_id', gen_random_uuid()::text) ON CONFLICT (key) DO NOTHING;`,
  // 5: the fleet's inference pause around a weight update (store/postgres/inference.ts): whether
  // model calls are held (one row, its epoch counting each change), and what each worker last said
  // of its capture proxy. Live control, not history: neither shipped nor mirrored (no _xid).
  `
  CREATE TABLE inference_pause (
    scope      TEXT PRIMARY KEY,
    paused     BOOLEAN NOT NULL,
    epoch      BIGINT NOT NULL,
    changed_at BIGINT NOT NULL
  );
  CREATE TABLE worker_inference (
    worker_key  TEXT PRIMARY KEY,
    worker      TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    paused      BOOLEAN NOT NULL,
    inflight    INTEGER NOT NULL,
    reported_at BIGINT NOT NULL
  );
  `,
  // 6: content-addressed files (store/postgres/content.ts): the task folders and local git
  // repositories a queued rollout names, for workers that do not see the coordinator's disk. A
  // digest's row is written after all its chunks, in one transaction. Neither shipped nor mirrored.
  `
  CREATE TABLE polar_content (
    digest     TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE TABLE polar_content_chunks (
    digest TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    bytes  BYTEA NOT NULL,
    PRIMARY KEY (digest, seq)
  );
  `,
];

/** Any number fits: the lock only has to be the same in every polar process. */
const MIGRATION_LOCK = 0x706f6c61; // "pola"

/** Brings a PostgreSQL database to the current schema; returns the version it is at. */
export async function migratePostgres(pg: Postgres): Promise<number> {
  // Up to date already (the common case): nothing is written, so a read-only role can read.
  const current = await pg.query(`SELECT value FROM polar_meta WHERE key = 'schema_version'`).catch((err: unknown) => {
    if ((err as { code?: string }).code === '42P01') return null; // no polar_meta yet: a new database
    throw err;
  });
  if (current && Number((current.rows[0] as { value?: string } | undefined)?.value) === PG_MIGRATIONS.length) return PG_MIGRATIONS.length;
  return pg.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(`CREATE TABLE IF NOT EXISTS polar_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    const row = (await tx.query(`SELECT value FROM polar_meta WHERE key = 'schema_version'`)).rows[0] as { value: string } | undefined;
    let version = row ? Number(row.value) : 0;
    if (version > PG_MIGRATIONS.length) {
      throw new PolarError(
        'POLAR_USAGE',
        `${pg.label} has polar schema version ${version}, newer than this polar understands (${PG_MIGRATIONS.length}); upgrade polar`,
      );
    }
    for (; version < PG_MIGRATIONS.length; version++) await tx.query(PG_MIGRATIONS[version]!);
    await tx.query(`INSERT INTO polar_meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, [
      String(version),
    ]);
    return version;
  });
}
