/**
 * What the proxy benchmarks share: the ~100 KB bodies grown from the harness fixtures, and the
 * processes on the paths (the mock upstream, the bare relay, polar) started and stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { Store } from '../src/store/store.js';
import { REPLAY_PROVIDERS, type ReplayProvider } from '../test/support/replay.js';

export type Json = Record<string, any>;

export const ROOT = path.resolve(import.meta.dirname, '..');
const TARGET_BYTES = 98 * 1024;
/** A tool output of ~2.5 KB with the non-ASCII text real listings have (names, prose, emoji). */
export const OUTPUT = Array.from({ length: 40 }, (_, i) => `src/módulo_${i}/fichier_${i}.ts — “handler ${i}”: 返回 input × ${i}; naïve café 🚀 ok`).join('\n');

export interface Body {
  provider: ReplayProvider;
  harness: { path: string; text: string; stream: { path: string; text: string } };
  /** The chat body polar sends upstream for it, non-streaming and streaming. */
  chat: { text: string; stream: { text: string } };
}

/** The API a body's harness speaks, as the results tables name it. */
export function apiName(b: Body): string {
  return (
    (
      { 'claude-code': 'Anthropic Messages', codex: 'OpenAI Responses', 'gemini-cli': 'Google generateContent', pi: 'OpenAI Chat (pass-through)' } as Record<
        string,
        string
      >
    )[b.provider.harness] ?? b.provider.harness
  );
}

/** A node process that prints its URL as one JSON line (`info`: the whole line); `env` adds to this process's environment. */
export async function spawnJsonLine(args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string; info: Json }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT, env: { ...process.env, ...env } });
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
  const info = JSON.parse(line) as Json;
  return { child, url: info.url as string, info };
}

export async function startPolar(
  bin: string,
  upstream: string,
  db: string,
  node: { args?: string[]; env?: Record<string, string> } = {},
): Promise<{ child: ChildProcess; url: string }> {
  return spawnJsonLine(
    [...(node.args ?? []), bin, 'proxy', '--upstream', upstream, '--model', 'Qwen/Qwen3-8B', '--port', '0', '--db', db, '--json', '--quiet'],
    node.env,
  );
}

export async function stop(child: ChildProcess): Promise<void> {
  // Ended already, by a code or a signal: its 'exit' has been emitted, and waiting for it would leave
  // a promise no handle keeps alive (node then exits 0 mid-run, with no report).
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  await new Promise((resolve) => child.once('exit', resolve));
}

export function streamingRequest(provider: ReplayProvider, body: Json): { path: string; text: string } {
  if (provider.path.includes(':generateContent'))
    return { path: `${provider.path.replace(':generateContent', ':streamGenerateContent')}?alt=sse`, text: JSON.stringify(body) };
  return { path: provider.path, text: JSON.stringify({ ...body, stream: true }) };
}

export async function post(url: string, p: string, text: string): Promise<string> {
  const res = await fetch(`${url}${p}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'bench', authorization: 'Bearer bench' },
    body: text,
  });
  const out = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${p}: ${out.slice(0, 300)}`);
  return out;
}

/**
 * Grows each harness's real first request through polar until it is ~100 KB, then sends it once
 * more non-streaming and streaming; what polar recorded as sent upstream is the direct body.
 * `harnesses` picks some of them (all when left out).
 */
export async function buildBodies(upstream: string, dir: string, harnesses?: readonly string[]): Promise<Body[]> {
  const db = path.join(dir, 'bodies.db');
  const polar = await startPolar(path.join(ROOT, 'bin/polar.js'), upstream, db);
  const bodies: Body[] = [];
  try {
    for (const provider of REPLAY_PROVIDERS.filter((p) => !harnesses || harnesses.includes(p.harness))) {
      const session = `body-${provider.harness}`;
      let body = provider.first();
      let reply: Json | null = null;
      for (let turn = 0; turn < 200; turn++) {
        if (reply) body = provider.next(body, reply, 'Go on.', OUTPUT);
        if (Buffer.byteLength(JSON.stringify(body)) >= TARGET_BYTES) break;
        reply = JSON.parse(await post(polar.url, `/s/${session}${provider.path}`, JSON.stringify(body))) as Json;
      }
      const text = JSON.stringify(body);
      const stream = streamingRequest(provider, body);
      await post(polar.url, `/s/${session}-final${provider.path}`, text);
      await post(polar.url, `/s/${session}-final${stream.path}`, stream.text);
      const store = Store.open(db, { readonly: true });
      const rows = store.requests.list(`${session}-final`).map((c) => store.requests.get(c.id)!);
      store.close();
      const chat = rows.find((r) => !r.streamed)!.upstreamRequest!;
      const chatStream = rows.find((r) => r.streamed)!.upstreamRequest!;
      bodies.push({ provider, harness: { path: provider.path, text, stream }, chat: { text: chat, stream: { text: chatStream } } });
    }
  } finally {
    await stop(polar.child);
  }
  return bodies;
}

/** Replaces the `## heading…` section of bench/RESULTS.md (up to the next `## `) with `text`, or appends it. */
export function writeResultsSection(heading: string, text: string): void {
  const file = path.join(ROOT, 'bench/RESULTS.md');
  const old = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n';
  const start = old.indexOf(`## ${heading}`);
  const next = start >= 0 ? old.indexOf('\n## ', start + 1) : -1;
  const head = start >= 0 ? old.slice(0, start) : `${old.trimEnd()}\n\n`;
  const tail = next >= 0 ? old.slice(next + 1) : '';
  fs.writeFileSync(file, `${head}${text}\n${tail ? `\n${tail}` : ''}`);
}

/**
 * The order the paths take their turns in round `round`: every permutation of them, one a round, in
 * turn. A process that still works after its reply (a collection, a checkpoint) slows whichever path
 * comes next; over the permutations each path follows each other path equally often. (Rotating one
 * order does not do that: it keeps the neighbours, so the path after a slow one is nearly always the
 * same.)
 */
export function turnOrder<T>(paths: readonly T[], round: number): T[] {
  const all = permutations(paths);
  return all[round % all.length]!;
}

function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}
