/**
 * Numbered schema migrations. `PRAGMA user_version` holds the number of the last one applied;
 * each runs in its own transaction. Append only: never edit a migration that has shipped.
 * Times are milliseconds since the Unix epoch (UTC).
 */
export const MIGRATIONS: readonly string[] = [
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
];
