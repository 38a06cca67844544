import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolarError } from '../../src/core/errors.js';
import { readHarborTasks } from '../../src/rollout/harbor/load.js';
import { fetchContent, localTask } from '../../src/rollout/queue/content-cache.js';
import { type StoredTask, shipTaskContent } from '../../src/rollout/queue/task-content.js';
import { readTaskFile, type RolloutTask } from '../../src/rollout/task-file.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { ContentUnavailable, CHUNK_BYTES } from '../../src/store/postgres/content.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { patient } from '../support/patience.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A queued task's folders through the shared store (issue 43): packed at enqueue, stored once by
 * digest, fetched once per machine into its state folder, checked by digest before use, capped.
 */

let server: TestPostgres;
let pg: Postgres;
let dir: string;
const MB = 1024 ** 2;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-content-'));
  server = await startTestPostgres();
  pg = new Postgres(await server.database('content'));
  await migratePostgres(pg);
}, patient(120_000));

afterAll(async () => {
  await pg?.close();
  await server?.close();
  removeTree(dir);
});

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd, encoding: 'utf8' }).trim();

/** A task file in a folder of its own, with `lines` (JSON objects); read as the coordinator reads it. */
function taskFile(name: string, lines: object[]): { file: string; tasks: RolloutTask[] } {
  const folder = path.join(dir, name);
  fs.mkdirSync(folder, { recursive: true });
  const file = path.join(folder, 'tasks.jsonl');
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
  return { file, tasks: readTaskFile(file) };
}

/** Every path under `root` with what it is: a file's mode and bytes, a link's target, a folder. */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const abs = path.join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(abs);
      if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(abs)}`;
      else if (st.isDirectory()) {
        out[r] = 'dir';
        walk(abs, r);
      } else out[r] = `${(st.mode & 0o777).toString(8)} ${fs.readFileSync(abs).toString('base64')}`;
    }
  };
  walk(root, '');
  return out;
}

const evaluator = { type: 'command', command: 'cat value.txt' };
const rows = async (sql: string, values: unknown[] = []) => (await pg.query(sql, values)).rows;

describe('task content through the shared store', () => {
  it('a workspace folder round-trips byte for byte (modes, links, long and non-ASCII names, empty folders), stored once however often it is packed', async () => {
    const ws = path.join(dir, 'ws-roundtrip');
    const deep = path.join(ws, 'a'.repeat(60), 'b'.repeat(60), 'ü-名前');
    fs.mkdirSync(deep, { recursive: true });
    fs.mkdirSync(path.join(ws, 'empty'));
    fs.writeFileSync(path.join(ws, 'value.txt'), '1\n');
    fs.writeFileSync(path.join(ws, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    fs.writeFileSync(path.join(deep, 'x'.repeat(40)), Buffer.from([0, 1, 2, 255]));
    // Larger than a chunk: stored as several rows, read back in order.
    fs.writeFileSync(path.join(ws, 'big.bin'), Buffer.alloc(CHUNK_BYTES + 12345, 7));
    fs.symlinkSync('value.txt', path.join(ws, 'link'));
    fs.symlinkSync(`../${'c'.repeat(120)}`, path.join(ws, 'long-link'));
    const { file, tasks } = taskFile('roundtrip', [
      { id: 'one', prompt: 'p', workspace: { dir: ws }, evaluator },
      { id: 'two', prompt: 'p', workspace: { dir: ws }, evaluator },
    ]);
    const first = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    const again = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    const ref = first[0]!.content!.workspace!;
    expect(ref).toMatchObject({ source: ws, digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    // One digest for the same files: both tasks, both enqueues; one row, its chunks in order.
    expect(first[1]!.content!.workspace!.digest).toBe(ref.digest);
    expect(again[0]!.content!.workspace!.digest).toBe(ref.digest);
    expect(await rows(`SELECT size FROM polar_content WHERE digest = $1`, [ref.digest])).toEqual([{ size: ref.bytes }]);
    expect((await rows(`SELECT seq FROM polar_content_chunks WHERE digest = $1 ORDER BY seq`, [ref.digest])).map((r) => r.seq)).toEqual([0, 1]);
    // No evaluator names the task file's folder: it does not travel.
    expect(first[0]!.content!.tasksDir).toBeUndefined();

    const state = path.join(dir, 'state-roundtrip');
    const local = await localTask(pg, first[0]!, { stateDir: state, maxBytes: 64 * MB });
    expect(local.tasksDir).toBeNull();
    const got = (local.task.workspace as { dir: string }).dir;
    expect(got).toBe(path.join(state, 'content', ref.digest));
    expect(tree(got)).toEqual(tree(ws));
    expect(local.task).not.toHaveProperty('content');
  });

  it('a second fetch on the machine reads nothing from PostgreSQL; bytes changed in PostgreSQL are refused before use, with the reason', async () => {
    const ws = path.join(dir, 'ws-cache');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'value.txt'), 'cached\n');
    const { file, tasks } = taskFile('cache', [{ id: 'c', prompt: 'p', workspace: { dir: ws }, evaluator }]);
    const [stored] = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    const { digest } = stored!.content!.workspace!;
    const state = path.join(dir, 'state-cache');
    const cache = { stateDir: state, maxBytes: 64 * MB };
    // Samples of one task starting together: one download.
    const [a, b] = await Promise.all([fetchContent(pg, digest, cache), fetchContent(pg, digest, cache)]);
    expect(a).toBe(b);
    // Tampered with in the store: this machine's copy, checked when it was fetched, is used without a query...
    await pg.query(`UPDATE polar_content_chunks SET bytes = overlay(bytes placing '\\x41'::bytea from 600 for 1) WHERE digest = $1`, [digest]);
    const counting = new CountingPg(pg);
    expect(fs.readFileSync(path.join(await fetchContent(counting, digest, cache), 'value.txt'), 'utf8')).toBe('cached\n');
    expect(counting.queries).toBe(0);
    // ...and another machine (another state folder) refuses the changed bytes, leaving nothing behind.
    const other = path.join(dir, 'state-other');
    const refused = await localTask(pg, stored!, { stateDir: other, maxBytes: 64 * MB }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ContentUnavailable);
    expect((refused as Error).message).toMatch(new RegExp(`^${ws}: content sha256:${digest.slice(0, 12)} in the shared store does not match its digest`));
    expect(fs.readdirSync(path.join(other, 'content'))).toEqual([]);
    // Gone from the store: said so.
    await pg.query(`DELETE FROM polar_content WHERE digest = $1`, [digest]);
    const missing = await fetchContent(pg, digest, { stateDir: path.join(dir, 'state-third'), maxBytes: 64 * MB }).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/is not in the shared store/);
  });

  it('a folder over the cap stops the enqueue naming the task, the path and what to do, storing nothing; a worker with a lower cap refuses it', async () => {
    const ws = path.join(dir, 'ws-big');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'data.bin'), Buffer.alloc(3 * MB, 1));
    const { file, tasks } = taskFile('big', [{ id: 'big-task', prompt: 'p', workspace: { dir: ws }, evaluator }]);
    const before = (await rows(`SELECT count(*)::int AS n FROM polar_content`))[0]!.n;
    const err = await shipTaskContent(pg, tasks, file, { maxBytes: 2 * MB }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolarError);
    expect((err as PolarError).code).toBe('POLAR_USAGE');
    expect((err as Error).message).toMatch(
      new RegExp(
        `^task big-task's workspace folder ${ws} is too big to send to workers through the shared store \\(.*data\\.bin alone is 3 MiB; the cap is 2 MiB\\)`,
      ),
    );
    expect((err as Error).message).toMatch(/POLAR_CONTENT_MAX_MB/);
    expect((await rows(`SELECT count(*)::int AS n FROM polar_content`))[0]!.n).toBe(before);
    // The task file's folder, sent for a checker, says so and how to keep it small.
    const checked = taskFile('big', [
      { id: 'big-task', prompt: 'p', workspace: { empty: true }, evaluator: { type: 'command', command: 'sh $POLAR_TASKS_DIR/c.sh' } },
    ]);
    fs.writeFileSync(path.join(path.dirname(checked.file), 'huge.bin'), Buffer.alloc(3 * MB, 2));
    const folder = await shipTaskContent(pg, checked.tasks, checked.file, { maxBytes: 2 * MB }).catch((e: unknown) => e);
    expect((folder as Error).message).toMatch(
      new RegExp(
        `^the task file's folder ${path.dirname(checked.file)} is too big .*\\(it travels because an evaluator reads \\$POLAR_TASKS_DIR: keep the task file and its checkers in a folder of their own\\)`,
      ),
    );
    // Stored under a larger cap, then fetched by a worker whose cap is lower.
    const [stored] = await shipTaskContent(pg, tasks, file, { maxBytes: 8 * MB });
    const refused = await localTask(pg, stored!, { stateDir: path.join(dir, 'state-big'), maxBytes: 2 * MB }).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/is 3\.0 MiB, over this worker's cap of 2\.0 MiB \(POLAR_CONTENT_MAX_MB\)/);
    // This worker's cap, not the content's fault: thrown as an ordinary error (the job goes back to
    // the queue for a worker with a larger cap), never ContentUnavailable (which ends the sample).
    expect(refused).toBeInstanceOf(Error);
    expect(refused).not.toBeInstanceOf(ContentUnavailable);
    expect(refused).not.toBeInstanceOf(PolarError);
    // The same task under a large enough cap is had; its bytes changed in the store end it for every worker.
    const state = path.join(dir, 'state-big-ok');
    const had = (await localTask(pg, stored!, { stateDir: state, maxBytes: 8 * MB })).task.workspace as { dir: string };
    expect(fs.existsSync(path.join(had.dir, 'data.bin'))).toBe(true);
    await pg.query(`UPDATE polar_content_chunks SET bytes = overlay(bytes placing '\\x41'::bytea from 600 for 1) WHERE digest = $1 AND seq = 0`, [
      stored!.content!.workspace!.digest,
    ]);
    const changed = await localTask(pg, stored!, { stateDir: path.join(dir, 'state-big-2'), maxBytes: 8 * MB }).catch((e: unknown) => e);
    expect(changed).toBeInstanceOf(ContentUnavailable);
    expect((changed as Error).message).toMatch(/does not match its digest/);
  });

  it('a tar that cannot unpack on this machine is an ordinary error (handed back), not the content being unavailable', async () => {
    const ws = path.join(dir, 'ws-notar');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'value.txt'), '1\n');
    const { file, tasks } = taskFile('notar', [{ id: 'n', prompt: 'p', workspace: { dir: ws }, evaluator }]);
    const [stored] = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    const state = path.join(dir, 'state-notar');
    const saved = process.env.PATH;
    process.env.PATH = path.join(dir, 'no-such-bin');
    const refused = await localTask(pg, stored!, { stateDir: state, maxBytes: 64 * MB })
      .catch((e: unknown) => e)
      .finally(() => {
        process.env.PATH = saved;
      });
    expect(refused).toBeInstanceOf(Error);
    expect(refused).not.toBeInstanceOf(ContentUnavailable);
    expect((refused as Error).message).toMatch(new RegExp(`^${ws}: cannot unpack content`));
    expect(fs.readdirSync(path.join(state, 'content'))).toEqual([]);
  });

  it("a workspace folder given through a symbolic link packs the folder it points to, not a link to the coordinator's path", async () => {
    const real = path.join(dir, 'ws-real');
    fs.mkdirSync(path.join(real, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(real, 'value.txt'), 'real\n');
    fs.writeFileSync(path.join(real, 'sub', 'x.txt'), 'x\n');
    fs.symlinkSync('value.txt', path.join(real, 'inner-link'));
    const linked = path.join(dir, 'ws-linked');
    fs.symlinkSync(real, linked);
    const { file, tasks } = taskFile('linked', [{ id: 'l', prompt: 'p', workspace: { dir: linked }, evaluator }]);
    const [stored] = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    expect(stored!.content!.workspace).toMatchObject({ source: linked });
    const local = await localTask(pg, stored!, { stateDir: path.join(dir, 'state-linked'), maxBytes: 64 * MB });
    const got = (local.task.workspace as { dir: string }).dir;
    expect(fs.lstatSync(got).isDirectory()).toBe(true);
    // The target's files, and a link inside it kept a link.
    expect(tree(got)).toEqual(tree(real));
    expect(tree(got)['inner-link']).toBe('link value.txt');
  });

  it("a task file's folder reached through a linked parent travels with its files, and its workspace is a path in it", async () => {
    const real = path.join(dir, 'ds-real');
    fs.mkdirSync(path.join(real, 'ws'), { recursive: true });
    fs.writeFileSync(path.join(real, 'ws', 'value.txt'), '1\n');
    fs.writeFileSync(path.join(real, 'check.sh'), 'cat value.txt\n');
    fs.writeFileSync(
      path.join(real, 't.jsonl'),
      JSON.stringify({ id: 'd', prompt: 'p', workspace: { dir: 'ws' }, evaluator: { type: 'command', command: 'sh "$POLAR_TASKS_DIR/check.sh"' } }),
    );
    // `--tasks data/t.jsonl` where `data -> <real>`.
    const data = path.join(dir, 'data');
    fs.symlinkSync(real, data);
    const file = path.join(data, 't.jsonl');
    const [stored] = await shipTaskContent(pg, readTaskFile(file), file, { maxBytes: 64 * MB });
    const { tasksDir, workspace } = stored!.content!;
    // The workspace is inside the folder already sent: a path in it, not packed again.
    expect(workspace).toMatchObject({ digest: tasksDir!.digest, sub: 'ws' });
    const local = await localTask(pg, stored!, { stateDir: path.join(dir, 'state-data'), maxBytes: 64 * MB });
    expect(fs.lstatSync(local.tasksDir!).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(local.tasksDir!, 'check.sh'), 'utf8')).toBe('cat value.txt\n');
    expect(fs.readFileSync(path.join((local.task.workspace as { dir: string }).dir, 'value.txt'), 'utf8')).toBe('1\n');
  });

  it(
    'a bad POLAR_CONTENT_MAX_MB stops `polar worker` at start, naming the variable (not every job it takes)',
    async () => {
      const url = await server.database('content-worker');
      const r = await polarCli(
        [
          'worker',
          '--queue',
          url,
          ...nodeAgentHarness('process.exit(0)'),
          '--upstream',
          'http://127.0.0.1:9',
          '--idle-exit',
          '1',
          '--out',
          path.join(dir, 'w-out'),
        ],
        { env: { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state-worker'), POLAR_CONTENT_MAX_MB: 'lots' }, timeout: patient(60_000) },
      );
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/POLAR_CONTENT_MAX_MB must be a size in MiB/);
      expect(r.stderr).not.toMatch(/ready for/);
    },
    patient(90_000),
  );

  it('a local git repository travels with its history (a commit on another branch checks out); a bundle file too; a URL stays a URL', async () => {
    const repo = path.join(dir, 'repo');
    fs.mkdirSync(repo);
    git(repo, 'init', '--quiet');
    fs.writeFileSync(path.join(repo, 'value.txt'), '0.25\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '--quiet', '-m', 'one');
    git(repo, 'checkout', '--quiet', '-b', 'other');
    fs.writeFileSync(path.join(repo, 'value.txt'), '0.75\n');
    git(repo, 'commit', '--quiet', '-am', 'two');
    const commit = git(repo, 'rev-parse', 'HEAD');
    git(repo, 'checkout', '--quiet', 'main');
    const bundle = path.join(dir, 'repo.bundle');
    git(repo, 'bundle', 'create', '--quiet', bundle, '--all');
    const { file, tasks } = taskFile('git', [
      { id: 'local', prompt: 'p', workspace: { git: repo, commit }, evaluator },
      { id: 'bundle', prompt: 'p', workspace: { git: bundle, commit }, evaluator },
      { id: 'url', prompt: 'p', workspace: { git: 'https://example.invalid/r.git', commit }, evaluator },
    ]);
    const stored = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    expect(stored[2]).toEqual(tasks[2]);
    const state = path.join(dir, 'state-git');
    for (const task of stored.slice(0, 2)) {
      const local = await localTask(pg, task, { stateDir: state, maxBytes: 64 * MB });
      const ws = local.task.workspace as { git: string; commit: string };
      expect(ws.commit).toBe(commit);
      expect(ws.git.startsWith(path.join(state, 'content'))).toBe(true);
      const clone = path.join(dir, `clone-${task.id}`);
      execFileSync('git', ['clone', '--quiet', '--no-checkout', ws.git, clone]);
      git(clone, 'checkout', '--quiet', '--detach', commit);
      expect(fs.readFileSync(path.join(clone, 'value.txt'), 'utf8')).toBe('0.75\n');
    }
  });

  it("the task file's folder travels when an evaluator names $POLAR_TASKS_DIR, and a workspace inside it is a path in it, not packed again", async () => {
    const folder = path.join(dir, 'hidden');
    fs.mkdirSync(path.join(folder, 'ws'), { recursive: true });
    fs.writeFileSync(path.join(folder, 'ws', 'value.txt'), '1\n');
    fs.writeFileSync(path.join(folder, 'check.sh'), 'cat value.txt\n');
    const { file, tasks } = taskFile('hidden', [
      { id: 'h', prompt: 'p', workspace: { dir: 'ws' }, evaluator: { type: 'command', command: 'sh "$POLAR_TASKS_DIR/check.sh"' } },
    ]);
    const [stored] = await shipTaskContent(pg, tasks, file, { maxBytes: 64 * MB });
    const { tasksDir, workspace } = stored!.content!;
    expect(tasksDir).toMatchObject({ source: path.dirname(file) });
    expect(workspace).toMatchObject({ digest: tasksDir!.digest, sub: 'ws', source: path.join(path.dirname(file), 'ws') });
    const local = await localTask(pg, stored!, { stateDir: path.join(dir, 'state-hidden'), maxBytes: 64 * MB });
    expect(fs.readFileSync(path.join(local.tasksDir!, 'check.sh'), 'utf8')).toBe('cat value.txt\n');
    expect(fs.readFileSync(path.join((local.task.workspace as { dir: string }).dir, 'value.txt'), 'utf8')).toBe('1\n');
    // A ref whose path leaves its content is refused.
    const escaping: StoredTask = { ...stored!, content: { workspace: { ...workspace!, sub: '../../etc' } } };
    await expect(localTask(pg, escaping, { stateDir: path.join(dir, 'state-hidden'), maxBytes: 64 * MB })).rejects.toThrow(/leaves the content/);
  });

  it("a Harbor task folder travels whole and every path of its trial points into this machine's copy", async () => {
    const task = path.join(dir, 'harbor', 'partial-credit');
    fs.cpSync(path.resolve(__dirname, '../../fixtures/harbor/partial-credit'), task, { recursive: true });
    const tasks = readHarborTasks(task);
    const [stored] = await shipTaskContent(pg, tasks, task, { maxBytes: 64 * MB });
    expect(stored!.content).toEqual({ harbor: expect.objectContaining({ source: task }) });
    const state = path.join(dir, 'state-harbor');
    const local = await localTask(pg, stored!, { stateDir: state, maxBytes: 64 * MB });
    const trial = local.task.harbor!;
    expect(trial.dir).toBe(path.join(state, 'content', stored!.content!.harbor!.digest));
    expect(JSON.stringify(trial)).not.toContain(task);
    expect(fs.readFileSync(path.join(trial.testsDir, 'test.sh'), 'utf8')).toMatch(/score\.py/);
    expect(trial.copies.length).toBeGreaterThan(0);
    for (const c of trial.copies) expect(fs.existsSync(c.from)).toBe(true);
    expect(fs.existsSync(path.join(trial.solutionDir!, 'solve.sh'))).toBe(true);
  });
});

/** A store that counts the queries made through it. */
class CountingPg {
  queries = 0;
  constructor(private readonly pg: Postgres) {}
  query(text: string, values?: readonly unknown[]) {
    this.queries++;
    return this.pg.query(text, values);
  }
}
