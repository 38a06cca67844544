import type { Db } from './db-handle.js';
import { commonPrefixLength } from '../core/tokens.js';
import { MIN_SHARED_TOKENS, stringDelta } from './delta.js';
import { packUint32, unpackUint32 } from '../core/token-packing.js';

/**
 * Migration 8: rows stored whole become deltas against their agent's previous call (delta.ts), as
 * new rows are written from now on. Tool counts that were read from the upstream body at query
 * time are stored first, since a delta'd body can no longer be queried as JSON. One row in memory at
 * a time (plus each agent's latest), so a large database converts in bounded memory.
 */
export function storeAsDeltas(db: Db): void {
  db.exec(`
    ALTER TABLE requests ADD COLUMN prompt_base TEXT;
    ALTER TABLE requests ADD COLUMN prompt_base_len INTEGER;
    ALTER TABLE request_bodies ADD COLUMN original_base TEXT;
    ALTER TABLE request_bodies ADD COLUMN original_prefix INTEGER;
    ALTER TABLE request_bodies ADD COLUMN original_suffix INTEGER;
    ALTER TABLE request_bodies ADD COLUMN upstream_base TEXT;
    ALTER TABLE request_bodies ADD COLUMN upstream_prefix INTEGER;
    ALTER TABLE request_bodies ADD COLUMN upstream_suffix INTEGER;
    UPDATE requests SET tool_count = (
      SELECT CASE WHEN json_valid(b.upstream_request) THEN json_array_length(b.upstream_request, '$.tools') END
        FROM request_bodies b WHERE b.request_id = requests.id)
     WHERE tool_count IS NULL;
  `);
  const sessions = db.prepare(`SELECT id FROM sessions ORDER BY created_at, id`).pluck().all() as string[];
  const callsOf = db.prepare(`SELECT id, agent_id FROM requests WHERE session_id = ? ORDER BY seq`);
  const tokensOf = db.prepare(`SELECT prompt_ids, sampled_ids FROM requests WHERE id = ?`);
  const bodiesOf = db.prepare(`SELECT original_request, upstream_request FROM request_bodies WHERE request_id = ?`);
  const setPrompt = db.prepare(`UPDATE requests SET prompt_ids = ?, prompt_base = ?, prompt_base_len = ? WHERE id = ?`);
  const setBody = {
    original: db.prepare(`UPDATE request_bodies SET original_request = ?, original_base = ?, original_prefix = ?, original_suffix = ? WHERE request_id = ?`),
    upstream: db.prepare(`UPDATE request_bodies SET upstream_request = ?, upstream_base = ?, upstream_prefix = ?, upstream_suffix = ? WHERE request_id = ?`),
  };
  for (const session of sessions) {
    const lastTokens = new Map<string, { id: string; ids: number[] }>();
    const lastBodies = new Map<string, { id: string; original: string | null; upstream: string | null }>();
    for (const call of callsOf.all(session) as { id: string; agent_id: string }[]) {
      const t = tokensOf.get(call.id) as { prompt_ids: Buffer | null; sampled_ids: Buffer | null };
      const prompt = unpackUint32(t.prompt_ids);
      const sampled = unpackUint32(t.sampled_ids);
      const before = lastTokens.get(call.agent_id);
      if (prompt && before) {
        const shared = commonPrefixLength(before.ids, prompt);
        if (shared >= MIN_SHARED_TOKENS) setPrompt.run(packUint32(prompt.slice(shared)), before.id, shared, call.id);
      }
      if (prompt && sampled) lastTokens.set(call.agent_id, { id: call.id, ids: [...prompt, ...sampled] });
      const b = bodiesOf.get(call.id) as { original_request: string | null; upstream_request: string | null } | undefined;
      if (!b) continue;
      const previous = lastBodies.get(call.agent_id);
      for (const kind of ['original', 'upstream'] as const) {
        const text = kind === 'original' ? b.original_request : b.upstream_request;
        const base = previous?.[kind];
        const d = text !== null && typeof base === 'string' ? stringDelta(base, text) : null;
        if (d) setBody[kind].run(d.middle, previous!.id, d.prefix, d.suffix, call.id);
      }
      lastBodies.set(call.agent_id, { id: call.id, original: b.original_request, upstream: b.upstream_request });
    }
  }
}
