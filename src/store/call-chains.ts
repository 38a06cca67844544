import type { TokenIds } from '../core/tokens.js';
import type { Db } from './db.js';
import { commonPrefixLength } from '../core/tokens.js';
import { applyStringDelta, byteDelta, MIN_SHARED_TOKENS, stringDelta, utf16Units, type BodyText } from './delta.js';
import { unpackUint32 } from '../core/token-packing.js';

/** A call's place: the session and agent whose earlier calls it is stored against. */
export interface CallKey {
  sessionId: string;
  agentId: string;
}

export type BodyKind = 'original' | 'upstream';

const MAX_AGENTS = 64;
const MAX_RESOLVED = 8;

/**
 * The write side's memory of each agent's latest stored call (its prompt + sampled ids and its two
 * bodies), so a new call is stored as a delta without reading anything back. Per store instance,
 * bounded (least recently used agents are forgotten: their next call is stored whole). Only rows
 * already committed are remembered, so every reference points at data that is in the database.
 */
export class RecentCalls {
  private readonly keys = new Map<string, CallKey>();
  private readonly sequences = new Map<string, { id: string; ids: Uint32Array; room: Uint32Array }>();
  private readonly bodies = new Map<string, { id: string; original: HeldBody | null; upstream: HeldBody | null }>();

  register(id: string, key: CallKey): void {
    this.keys.set(id, key);
    if (this.keys.size > 4096) this.keys.delete(this.keys.keys().next().value!);
  }

  keyOf(id: string): CallKey | undefined {
    return this.keys.get(id);
  }

  /** The prompt stored against the agent's latest call: a reference and the suffix, or whole. */
  promptDelta(key: CallKey | undefined, prompt: TokenIds): { base: string | null; baseLength: number | null; suffix: TokenIds } {
    const last = key ? this.sequences.get(agentOf(key)) : undefined;
    if (!last) return { base: null, baseLength: null, suffix: prompt };
    const shared = commonPrefixLength(last.ids, prompt);
    if (shared < MIN_SHARED_TOKENS) return { base: null, baseLength: null, suffix: prompt };
    return { base: last.id, baseLength: shared, suffix: prompt.slice(shared) };
  }

  rememberSequence(key: CallKey | undefined, id: string, prompt: TokenIds, sampled: readonly number[]): void {
    if (!key) return;
    const agent = agentOf(key);
    const n = prompt.length + sampled.length;
    const room = roomFor(this.sequences.get(agent)?.room, n, (size) => new Uint32Array(size));
    room.set(prompt);
    room.set(sampled, prompt.length);
    touch(this.sequences, agent, { id, ids: room.subarray(0, n), room });
  }

  /**
   * A body stored against the agent's previous body of the same kind, when both are held the same
   * way (text, or bytes: the proxy's bodies are bytes on every call); null: store it whole.
   */
  bodyDelta(key: CallKey | undefined, kind: BodyKind, body: HeldBody): { middle: BodyText; prefix: number; suffix: number; base: string } | null {
    const last = key ? this.bodies.get(agentOf(key)) : undefined;
    const base = last?.[kind];
    if (!last || !base) return null;
    if (typeof base.body === 'string' || typeof body.body === 'string') {
      if (typeof base.body !== 'string' || typeof body.body !== 'string') return null;
      const d = stringDelta(base.body, body.body);
      return d ? { ...d, base: last.id } : null;
    }
    base.units ??= utf16Units(base.body, 0, base.body.length);
    const d = byteDelta(base.body, base.units, body.body);
    if (!d) return null;
    body.units = d.units;
    return { middle: d.middle, prefix: d.prefix, suffix: d.suffix, base: last.id };
  }

  rememberBodies(key: CallKey | undefined, id: string, original: HeldBody | null, upstream: HeldBody | null): void {
    if (!key) return;
    const agent = agentOf(key);
    const last = this.bodies.get(agent);
    touch(this.bodies, agent, { id, original: keep(last?.original, original), upstream: keep(last?.upstream, upstream) });
  }
}

/**
 * Each agent's latest sequence and bodies are copied into memory the agent keeps and reuses, not
 * held as the call's own arrays: those were replaced on the agent's next call, after living long
 * enough to be promoted out of V8's young generation, and byte arrays promoted are freed only by a
 * full collection (~0.35 MB per 100 KB call, waiting for it). A conversation only grows, so the
 * room is given a quarter more than asked and is rarely made again.
 */
function roomFor<T extends Uint8Array | Uint32Array>(room: T | undefined, n: number, make: (size: number) => T): T {
  return room && room.length >= n ? room : make(Math.ceil(n * 1.25));
}

/**
 * Bodies larger than this are remembered as the call's own buffer, not copied into a room: a room
 * is the body again plus a quarter, per body and per agent, so 4 concurrent 60 MB calls kept
 * 4 × 2 × 75 MB of copies after they ended (their peak near 1 GB). A buffer this large lives outside
 * V8's heap, where the promotion the rooms avoid for small bodies does not arise.
 */
const COPY_BODIES_UP_TO = 1024 * 1024;

/** A body as remembered: small bytes copied into the agent's room (roomFor), large bytes and text as they are. */
function keep(last: HeldBody | null | undefined, held: HeldBody | null): HeldBody | null {
  if (held === null || typeof held.body === 'string') return held;
  if (held.body.length > COPY_BODIES_UP_TO) return { body: held.body, units: held.units };
  const room = roomFor(last?.room, held.body.length, (size) => Buffer.allocUnsafeSlow(size));
  held.body.copy(room);
  return { body: room.subarray(0, held.body.length), units: held.units, room };
}

/** A body as the write side keeps it: text, or UTF-8 bytes (the proxy's), as it came. */
export interface HeldBody {
  body: BodyText;
  /** For bytes: the length in UTF-16 units, once known (byteDelta). */
  units?: number;
  /** For bytes remembered: the agent's memory they were copied into (roomFor). */
  room?: Buffer;
}

function agentOf(key: CallKey): string {
  return `${key.sessionId}\u0000${key.agentId}`;
}

function touch<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_AGENTS) map.delete(map.keys().next().value!);
}

interface RawPromptRow {
  prompt_ids: Buffer | null;
  prompt_base: string | null;
  prompt_base_len: number | null;
  sampled_ids: Buffer | null;
}

interface RawBodyRow {
  text: string | null;
  base: string | null;
  prefix: number | null;
  suffix: number | null;
}

/**
 * The read side: a row's whole prompt ids and bodies, following its references back to a row
 * stored whole. Resolved sequences and bodies are kept for the most recent calls, so reading a
 * session call by call does each step once.
 */
export class ChainReader {
  private readonly promptStmt;
  private readonly bodyStmts;
  private readonly sequences = new Map<string, number[]>();
  private readonly bodies = new Map<string, string>();

  constructor(db: Db) {
    this.promptStmt = db.prepare(`SELECT prompt_ids, prompt_base, prompt_base_len, sampled_ids FROM requests WHERE id = ?`);
    this.bodyStmts = {
      original: db.prepare(
        `SELECT original_request AS text, original_base AS base, original_prefix AS prefix, original_suffix AS suffix FROM request_bodies WHERE request_id = ?`,
      ),
      upstream: db.prepare(
        `SELECT upstream_request AS text, upstream_base AS base, upstream_prefix AS prefix, upstream_suffix AS suffix FROM request_bodies WHERE request_id = ?`,
      ),
    };
  }

  /**
   * The whole prompt ids of a row whose stored part is `stored` and whose reference is
   * `base`/`baseLength`, one row at a time (a whole session is read by delta-read.ts).
   */
  prompt(stored: readonly number[] | null, base: string | null, baseLength: number | null): number[] | null {
    if (!base || baseLength === null) return stored ? [...stored] : null;
    const head = this.sequence(base);
    if (head.length < baseLength) throw new RangeError(`call ${base} holds ${head.length} tokens, fewer than the ${baseLength} a later call takes from it`);
    return [...head.slice(0, baseLength), ...(stored ?? [])];
  }

  /** A call's prompt ids followed by its sampled ids, resolved. */
  sequence(id: string): number[] {
    const cached = this.sequences.get(id);
    if (cached) return cached;
    const row = this.promptStmt.get(id) as RawPromptRow | undefined;
    if (!row) throw new RangeError(`call ${id} is referenced by a later call's prompt but is not in the database`);
    const prompt = this.prompt(unpackUint32(row.prompt_ids), row.prompt_base, row.prompt_base_len) ?? [];
    const out = [...prompt, ...(unpackUint32(row.sampled_ids) ?? [])];
    touchBounded(this.sequences, id, out);
    return out;
  }

  /** A call's whole request body of one kind, or null when none was written (yet). */
  body(id: string, kind: BodyKind): string | null {
    const row = this.bodyStmts[kind].get(id) as RawBodyRow | undefined;
    return row ? this.bodyOf(row, kind) : null;
  }

  /** A referenced call's body: ended and written, so it never changes and is kept for the next reader. */
  private baseBody(id: string, kind: BodyKind): string | null {
    const key = `${kind}\u0000${id}`;
    const cached = this.bodies.get(key);
    if (cached !== undefined) return cached;
    const text = this.body(id, kind);
    if (text !== null) touchBounded(this.bodies, key, text);
    return text;
  }

  /** A body row's whole text: itself, or its base's ends around its middle. */
  private bodyOf(row: RawBodyRow, kind: BodyKind): string | null {
    if (!row.base) return row.text;
    const base = this.baseBody(row.base, kind);
    if (base === null) throw new RangeError(`call ${row.base} is referenced by a later call's ${kind} request but has none`);
    return applyStringDelta(base, { prefix: row.prefix!, suffix: row.suffix!, middle: row.text ?? '' });
  }
}

function touchBounded<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_RESOLVED) map.delete(map.keys().next().value!);
}
