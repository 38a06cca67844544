import type { Db } from './db-handle.js';
import { tokenDigest } from '../core/token-digest.js';
import { storeAsDeltas } from './migrate-deltas.js';

/**
 * Numbered schema migrations. `PRAGMA user_version` holds the number of the last one applied;
 * an upgrade runs them all in one transaction (db.ts migrate). Append only: never edit a migration that has shipped.
 * Times are milliseconds since the Unix epoch (UTC). A change to a table the shared store holds
 * (postgres/tables.ts) needs its twin in postgres/schema.ts: test/integration/postgres-schema.test.ts
 * compares the two live schemas column by column.
 */
/** A step: SQL, or a function for what SQL cannot do (it runs inside the upgrade's transaction). */
export type Migration = string | ((db: Db) => void);

export const MIGRATIONS: readonly Migration[] = [
  // 1: sessions and one row per model call, with packed token columns and its request bodies.
  `
  CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    created_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    harness         TEXT,
    harness_version TEXT,
    cwd             TEXT,
    upstream_url    TEXT,
    served_model    TEXT,
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'completed', 'failed', 'timeout', 'aborted')),
    metadata        TEXT NOT NULL DEFAULT '{}'
  );

  CREATE TABLE requests (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions(id),
    agent_id            TEXT NOT NULL DEFAULT 'main',
    seq                 INTEGER NOT NULL,
    provider            TEXT NOT NULL,
    method              TEXT NOT NULL,
    path                TEXT NOT NULL,
    started_at          INTEGER NOT NULL,
    ended_at            INTEGER,
    status              TEXT NOT NULL DEFAULT 'in_progress'
                        CHECK (status IN ('in_progress', 'ok', 'error', 'aborted')),
    http_status         INTEGER,
    streamed            INTEGER NOT NULL DEFAULT 0,
    request_headers     TEXT,
    reply               TEXT,
    error               TEXT,
    error_code          TEXT,
    finish_reason       TEXT,
    usage               TEXT,
    requested_model     TEXT,
    served_model        TEXT,
    token_source        TEXT NOT NULL DEFAULT 'none' CHECK (token_source IN ('upstream', 'none')),
    prompt_ids          BLOB,
    sampled_ids         BLOB,
    logprobs            BLOB,
    prompt_token_count  INTEGER,
    sampled_token_count INTEGER,
    token_error         TEXT,
    UNIQUE (session_id, seq)
  );

  CREATE INDEX requests_started ON requests(started_at);

  -- The two large request texts live beside the row, 1:1, so they are written once, while the
  -- upstream generates; SQLite rewrites a whole row on UPDATE, and the row is updated at the end.
  CREATE TABLE request_bodies (
    request_id       TEXT PRIMARY KEY REFERENCES requests(id),
    original_request TEXT,
    upstream_request TEXT
  ) WITHOUT ROWID;
  `,
  // 2: the reply as a canonical (OpenAI Chat) assistant message, whatever the provider, so
  // training exports need not parse four providers' reply formats.
  `ALTER TABLE requests ADD COLUMN assistant_message TEXT;`,
  // 3: how the prompt was built, for upstreams where polar builds or pins it (token-in/token-out,
  // nemo-rl): 'bridged' onto the call in parent_call_id, or 'full' for render_reason; null for
  // upstreams that render prompts themselves. And the number of tools the call offered, which the
  // upstream request no longer shows when it is token ids.
  `ALTER TABLE requests ADD COLUMN tool_count INTEGER;
   ALTER TABLE requests ADD COLUMN prompt_render TEXT CHECK (prompt_render IN ('bridged', 'full'));
   ALTER TABLE requests ADD COLUMN parent_call_id TEXT;
   ALTER TABLE requests ADD COLUMN render_reason TEXT;
   ALTER TABLE requests ADD COLUMN rendered_tokens INTEGER;`,
  // 4: who wrote each row, and the `interrupted` status. A process registers itself in `owners`
  // (host, pid, boot id, start ticks) and stamps the sessions and calls it creates; a later process
  // on the same host that finds the owner gone marks its unfinished rows `interrupted`, keeping
  // whatever tokens arrived. SQLite cannot change a CHECK constraint in place, so both tables are
  // rebuilt (foreign keys are off while migrations run; see db.ts). Rows left unfinished by
  // versions that recorded no owner are reconciled here when they are over an hour old.
  `
  CREATE TABLE owners (
    id          INTEGER PRIMARY KEY,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    boot_id     TEXT,
    start_ticks INTEGER,
    started_at  INTEGER NOT NULL,
    command     TEXT,
    ended_at    INTEGER
  );

  CREATE TABLE sessions_v4 (
    id              TEXT PRIMARY KEY,
    created_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    harness         TEXT,
    harness_version TEXT,
    cwd             TEXT,
    upstream_url    TEXT,
    served_model    TEXT,
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'completed', 'failed', 'timeout', 'aborted', 'interrupted')),
    metadata        TEXT NOT NULL DEFAULT '{}',
    owner_id        INTEGER REFERENCES owners(id)
  );
  INSERT INTO sessions_v4 (id, created_at, ended_at, harness, harness_version, cwd, upstream_url, served_model, status, metadata)
    SELECT id, created_at, ended_at, harness, harness_version, cwd, upstream_url, served_model, status, metadata FROM sessions;
  DROP TABLE sessions;
  ALTER TABLE sessions_v4 RENAME TO sessions;
  CREATE INDEX sessions_active ON sessions(owner_id) WHERE status = 'active';

  CREATE TABLE requests_v4 (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions(id),
    agent_id            TEXT NOT NULL DEFAULT 'main',
    seq                 INTEGER NOT NULL,
    provider            TEXT NOT NULL,
    method              TEXT NOT NULL,
    path                TEXT NOT NULL,
    started_at          INTEGER NOT NULL,
    ended_at            INTEGER,
    status              TEXT NOT NULL DEFAULT 'in_progress'
                        CHECK (status IN ('in_progress', 'ok', 'error', 'aborted', 'interrupted')),
    http_status         INTEGER,
    streamed            INTEGER NOT NULL DEFAULT 0,
    request_headers     TEXT,
    reply               TEXT,
    error               TEXT,
    error_code          TEXT,
    finish_reason       TEXT,
    usage               TEXT,
    requested_model     TEXT,
    served_model        TEXT,
    token_source        TEXT NOT NULL DEFAULT 'none' CHECK (token_source IN ('upstream', 'none')),
    prompt_ids          BLOB,
    sampled_ids         BLOB,
    logprobs            BLOB,
    prompt_token_count  INTEGER,
    sampled_token_count INTEGER,
    token_error         TEXT,
    assistant_message   TEXT,
    tool_count          INTEGER,
    prompt_render       TEXT CHECK (prompt_render IN ('bridged', 'full')),
    parent_call_id      TEXT,
    render_reason       TEXT,
    rendered_tokens     INTEGER,
    owner_id            INTEGER REFERENCES owners(id),
    UNIQUE (session_id, seq)
  );
  INSERT INTO requests_v4 (id, session_id, agent_id, seq, provider, method, path, started_at, ended_at, status, http_status,
                           streamed, request_headers, reply, error, error_code, finish_reason, usage, requested_model,
                           served_model, token_source, prompt_ids, sampled_ids, logprobs, prompt_token_count,
                           sampled_token_count, token_error, assistant_message, tool_count, prompt_render,
                           parent_call_id, render_reason, rendered_tokens)
    SELECT id, session_id, agent_id, seq, provider, method, path, started_at, ended_at, status, http_status,
           streamed, request_headers, reply, error, error_code, finish_reason, usage, requested_model,
           served_model, token_source, prompt_ids, sampled_ids, logprobs, prompt_token_count,
           sampled_token_count, token_error, assistant_message, tool_count, prompt_render,
           parent_call_id, render_reason, rendered_tokens FROM requests;
  DROP TABLE requests;
  ALTER TABLE requests_v4 RENAME TO requests;
  CREATE INDEX requests_started ON requests(started_at);
  CREATE INDEX requests_in_progress ON requests(owner_id) WHERE status = 'in_progress';

  UPDATE requests SET status = 'interrupted',
                      ended_at = COALESCE(ended_at, started_at),
                      error = COALESCE(error, 'the polar process serving this call ended before it finished (found when upgrading the database)'),
                      error_code = COALESCE(error_code, 'POLAR_INTERRUPTED')
   WHERE status = 'in_progress' AND started_at < CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 3600000;
  UPDATE sessions SET status = 'interrupted', ended_at = COALESCE(ended_at, created_at)
   WHERE status = 'active'
     AND COALESCE((SELECT MAX(started_at) FROM requests r WHERE r.session_id = sessions.id), created_at)
         < CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 3600000;
  `,
  // 5: rollouts (tasks × N samples as GRPO groups). A rollout keeps the tasks it ran (so it can be
  // resumed from the database alone); each sample is one attempt-numbered session through the
  // stages INIT → READY → RUNNING → POSTRUN, ending completed / failed / timeout / error with its
  // reward; a group's statistics and advantages are written when all its samples have ended. A
  // sample's final status is set once (see RolloutsTable.finish), so no sample is rewarded twice.
  `
  CREATE TABLE rollouts (
    id               TEXT PRIMARY KEY,
    created_at       INTEGER NOT NULL,
    ended_at         INTEGER,
    status           TEXT NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'completed', 'interrupted', 'failed')),
    harness          TEXT NOT NULL,
    upstream_url     TEXT,
    upstream_kind    TEXT,
    served_model     TEXT,
    samples_per_task INTEGER NOT NULL,
    tasks_file       TEXT,
    accept           TEXT,
    config           TEXT NOT NULL DEFAULT '{}',
    owner_id         INTEGER REFERENCES owners(id)
  );

  CREATE TABLE rollout_tasks (
    rollout_id TEXT NOT NULL REFERENCES rollouts(id),
    task_id    TEXT NOT NULL,
    position   INTEGER NOT NULL,
    task       TEXT NOT NULL,
    PRIMARY KEY (rollout_id, task_id)
  ) WITHOUT ROWID;

  CREATE TABLE samples (
    id            TEXT PRIMARY KEY,
    rollout_id    TEXT NOT NULL REFERENCES rollouts(id),
    task_id       TEXT NOT NULL,
    sample_index  INTEGER NOT NULL,
    group_id      TEXT NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    session_id    TEXT,
    status        TEXT NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'init', 'ready', 'running', 'post',
                                    'completed', 'failed', 'timeout', 'error', 'interrupted')),
    error_stage   TEXT,
    error         TEXT,
    reward        REAL,
    trace_rewards TEXT,
    evaluator     TEXT,
    diff          TEXT,
    accepted      INTEGER,
    advantage     REAL,
    loo_advantage REAL,
    timing        TEXT NOT NULL DEFAULT '{}',
    started_at    INTEGER,
    ended_at      INTEGER,
    owner_id      INTEGER REFERENCES owners(id),
    UNIQUE (rollout_id, task_id, sample_index)
  );
  CREATE INDEX samples_session ON samples(session_id);
  CREATE INDEX samples_active ON samples(owner_id) WHERE status IN ('init', 'ready', 'running', 'post');

  CREATE TABLE groups (
    rollout_id   TEXT NOT NULL REFERENCES rollouts(id),
    task_id      TEXT NOT NULL,
    group_id     TEXT NOT NULL,
    samples      INTEGER NOT NULL,
    rewarded     INTEGER NOT NULL,
    mean         REAL,
    std          REAL,
    accepted     INTEGER NOT NULL DEFAULT 0,
    completed_at INTEGER NOT NULL,
    PRIMARY KEY (rollout_id, task_id)
  ) WITHOUT ROWID;
  `,
  // 6: the policy (weights) version each call was served by, as the trainer announced it to the proxy
  // (POST /admin/policy-version); a trace whose calls span two versions is off-policy in part.
  `ALTER TABLE requests ADD COLUMN policy_version TEXT;`,
  // 7: a digest of each call's token data as captured (token-digest.ts), so verify-faithfulness can
  // prove the rows still hold what the upstream sent. Rows written before it get theirs from what
  // they hold now: from here on, any change to them is caught.
  (db) => {
    db.exec(`ALTER TABLE requests ADD COLUMN token_digest TEXT;`);
    // One row in memory at a time: ids first, then each row (a statement cannot run while another iterates).
    const ids = db.prepare(`SELECT id FROM requests WHERE prompt_ids IS NOT NULL OR sampled_ids IS NOT NULL OR logprobs IS NOT NULL`).pluck().all() as string[];
    const read = db.prepare(`SELECT prompt_ids, sampled_ids, logprobs FROM requests WHERE id = ?`);
    const update = db.prepare(`UPDATE requests SET token_digest = ? WHERE id = ?`);
    for (const id of ids) {
      const r = read.get(id) as { prompt_ids: Buffer | null; sampled_ids: Buffer | null; logprobs: Buffer | null };
      update.run(tokenDigest(r.prompt_ids, r.sampled_ids, r.logprobs), id);
    }
  },
  // 8: storage linear in a session's length: a call's prompt ids and request bodies are stored as a
  // reference to its agent's previous call plus what is new (delta.ts, migrate-deltas.ts).
  storeAsDeltas,
  // 9: which process ran a sample's latest attempt (`host/pid`), so a rollout spread over many
  // machines shows who holds what (polar rollout status).
  `ALTER TABLE samples ADD COLUMN worker TEXT;`,
  // 10: calls a proxy with session keys refused (no key, a key without its secret, a guessed one, a
  // sibling's): recorded here and never in a session, so they cannot become anyone's training data.
  // Headers are stored redacted and the path with its secret-named query parameters replaced.
  `
  CREATE TABLE audit (
    id              TEXT PRIMARY KEY,
    at              INTEGER NOT NULL,
    method          TEXT NOT NULL,
    path            TEXT NOT NULL,
    claimed_session TEXT,
    reason          TEXT NOT NULL,
    remote          TEXT,
    request_headers TEXT
  );
  CREATE INDEX audit_at ON audit(at);
  `,
  // 11: what each call was sampled with as it went upstream (temperature, top_p, top_k, max tokens,
  // seed), whether polar pinned it (rollout, worker, gym-agent, train) or passed the request
  // through (run, proxy), and the session's fields dropped or sent off-policy
  // (upstream/sampling-policy.ts), as JSON. A column rather than a reading of the stored upstream
  // request: that body is stored as a delta, may be bytes, is scrubbed, and does not say what the
  // session asked for that was dropped, nor the policy in force. NULL for calls before it.
  `ALTER TABLE requests ADD COLUMN sampling TEXT;`,
];
