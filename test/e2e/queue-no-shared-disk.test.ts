import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Postgres } from '../../src/store/postgres/client.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 43: a queued rollout whose workers do not see the coordinator's disk. The coordinator
 * enqueues from a folder that is removed before any worker starts; the worker runs from another
 * folder with a state folder of its own, and gets every `dir` workspace, local git repository,
 * hidden checker ($POLAR_TASKS_DIR) and Harbor task folder from the shared store, so each sample
 * completes with the reward its content gives. Content missing from the store ends its sample
 * `error` with that reason, not a path the worker cannot see.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-no-shared-disk-'));
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
}, patient(120_000));

afterAll(async () => {
  await upstream?.close();
  await server?.close();
  removeTree(dir);
});

const env = (state: string): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: state, POLAR_QUEUE_SUPERVISE_S: '1' });

/** One model call, then nothing: the workspace as the task gave it is what the evaluator scores. */
const AGENT = `
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: process.argv[2] ?? '' }] }),
});
if (!res.ok) process.exit(3);
await res.json();
`;

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd, encoding: 'utf8' }).trim();

/** `polar worker` as another machine (a state folder of its own), until the queue has been empty for 5 s. */
async function worker(url: string, name: string, extra: string[], harness: string[]) {
  const machine = path.join(dir, `machine-${name}`);
  const state = path.join(machine, 'state');
  const r = await polarCli(
    ['worker', '--queue', url, ...harness, '--upstream', upstream.url, '--idle-exit', '5', '--json', '--out', path.join(machine, 'out'), ...extra],
    { env: env(state), timeout: patient(240_000) },
  );
  return { ...r, state };
}

async function enqueue(url: string, tasks: string, harness: string[], state: string): Promise<string> {
  const r = await polarCli(['rollout', '--queue', url, '--tasks', tasks, ...harness, '--upstream', upstream.url, '--samples', '2', '--json'], {
    env: env(state),
    timeout: patient(120_000),
  });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout).rolloutId as string;
}

describe('a queued rollout with no shared disk', () => {
  it(
    "dir and git workspaces, a hidden checker and a Harbor task reach a worker that cannot see the coordinator's folders; missing content fails its sample with the reason",
    async () => {
      const url = await server.database('no_shared_disk');
      const coordinator = path.join(dir, 'coordinator');
      const coordState = path.join(coordinator, 'state');
      // The JSONL tasks: a workspace inside the task file's folder, one outside it, a local git
      // repository at a commit on a branch that is not checked out, all scored by a checker kept
      // beside the task file (not in any workspace).
      const tasksDir = path.join(coordinator, 'tasks');
      fs.mkdirSync(path.join(tasksDir, 'ws-in'), { recursive: true });
      fs.writeFileSync(path.join(tasksDir, 'ws-in', 'value.txt'), '0.5\n');
      fs.mkdirSync(path.join(coordinator, 'ws-out'));
      fs.writeFileSync(path.join(coordinator, 'ws-out', 'value.txt'), '0.25\n');
      const repo = path.join(coordinator, 'repo');
      fs.mkdirSync(repo);
      git(repo, 'init', '--quiet');
      fs.writeFileSync(path.join(repo, 'value.txt'), '0\n');
      git(repo, 'add', '.');
      git(repo, 'commit', '--quiet', '-m', 'one');
      git(repo, 'checkout', '--quiet', '-b', 'fix');
      fs.writeFileSync(path.join(repo, 'value.txt'), '0.75\n');
      git(repo, 'commit', '--quiet', '-am', 'two');
      const commit = git(repo, 'rev-parse', 'HEAD');
      git(repo, 'checkout', '--quiet', 'main');
      fs.writeFileSync(path.join(tasksDir, 'check.sh'), 'cat value.txt\n');
      const evaluator = { type: 'command', command: 'sh "$POLAR_TASKS_DIR/check.sh"' };
      const agent = path.join(dir, 'agent.mjs');
      fs.writeFileSync(agent, AGENT);
      const tasksFile = path.join(tasksDir, 'tasks.jsonl');
      fs.writeFileSync(
        tasksFile,
        [
          { id: 'dir-in', prompt: 'look', workspace: { dir: 'ws-in' }, evaluator },
          { id: 'dir-out', prompt: 'look', workspace: { dir: '../ws-out' }, evaluator },
          { id: 'git-local', prompt: 'look', workspace: { git: '../repo', commit }, evaluator },
        ]
          .map((t) => JSON.stringify(t))
          .join('\n'),
      );
      const harness = nodeAgentHarness(agent);
      const jsonl = await enqueue(url, tasksFile, harness, coordState);
      // A second rollout whose content is then lost from the store.
      const lostDir = path.join(coordinator, 'lost');
      fs.mkdirSync(path.join(lostDir, 'ws'), { recursive: true });
      fs.writeFileSync(path.join(lostDir, 'ws', 'value.txt'), '1\n');
      fs.writeFileSync(
        path.join(lostDir, 'tasks.jsonl'),
        JSON.stringify({ id: 'lost', prompt: 'look', workspace: { dir: 'ws' }, evaluator: { type: 'command', command: 'cat value.txt' } }),
      );
      const lost = await enqueue(url, path.join(lostDir, 'tasks.jsonl'), harness, coordState);
      const pg = new Postgres(url);
      try {
        const lostTask = JSON.parse(String((await pg.query(`SELECT task FROM rollout_tasks WHERE rollout_id = $1`, [lost])).rows[0]!.task));
        await pg.query(`DELETE FROM polar_content WHERE digest = $1`, [lostTask.content.workspace.digest]);
        // The coordinator's folders are gone before any worker starts.
        removeTree(coordinator);

        const w = await worker(url, 'one', ['--sandbox', 'none', '--concurrency', '2'], harness);
        expect(w.code, w.stderr).toBe(0);
        expect(w.stderr).not.toMatch(/ENOENT/);
        const samples = (await pg.query(`SELECT rollout_id, task_id, status, reward, error FROM samples ORDER BY rollout_id, task_id, id`)).rows;
        const mine = samples.filter((s) => s.rollout_id === jsonl);
        const want: Record<string, number> = { 'dir-in': 0.5, 'dir-out': 0.25, 'git-local': 0.75 };
        expect(mine.map((s) => [s.task_id, s.status, s.reward])).toEqual(
          Object.entries(want).flatMap(([id, r]) => [
            [id, 'completed', r],
            [id, 'completed', r],
          ]),
        );
        // Each sample's one call, in PostgreSQL as the model server answered it.
        const calls = Number(
          (
            await pg.query(`SELECT count(*) AS n FROM requests r JOIN samples s ON s.session_id = r.session_id WHERE s.rollout_id = $1 AND r.status = 'ok'`, [
              jsonl,
            ])
          ).rows[0]!.n,
        );
        expect(calls).toBe(6);
        // The lost content: each sample ended error at INIT, saying so.
        const gone = samples.filter((s) => s.rollout_id === lost);
        expect(gone).toHaveLength(2);
        for (const s of gone) {
          expect(s.status).toBe('error');
          expect(s.error).toMatch(
            new RegExp(
              `^the task's files could not be had from the shared store: ${path.join(lostDir, 'ws')}: content sha256:[0-9a-f]{12} is not in the shared store`,
            ),
          );
        }
        // Fetched once per machine: one folder per digest in the worker's state folder (the task
        // file's folder, which holds ws-in; ws-out; the repository).
        expect(fs.readdirSync(path.join(w.state, 'content')).filter((n) => /^[0-9a-f]{64}$/.test(n))).toHaveLength(3);

        // A Harbor task folder, also removed after enqueue: its Dockerfile's COPY and its tests/ come from the store.
        const harbor = path.join(dir, 'coordinator-harbor', 'copy-check');
        fs.mkdirSync(path.join(harbor, 'environment', 'app'), { recursive: true });
        fs.mkdirSync(path.join(harbor, 'tests'));
        fs.writeFileSync(path.join(harbor, 'task.toml'), 'version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n');
        fs.writeFileSync(path.join(harbor, 'instruction.md'), 'Leave /app as it is.\n');
        fs.writeFileSync(path.join(harbor, 'environment', 'Dockerfile'), 'FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ .\n');
        fs.writeFileSync(path.join(harbor, 'environment', 'app', 'value.txt'), 'shipped\n');
        fs.writeFileSync(path.join(harbor, 'tests', 'expected.txt'), 'shipped\n');
        fs.writeFileSync(
          path.join(harbor, 'tests', 'test.sh'),
          '#!/bin/bash\nmkdir -p /logs/verifier\nif cmp -s /app/value.txt /tests/expected.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
        );
        const harborHarness = ['--harness', 'custom', '--command', 'true'];
        const harborRollout = await enqueue(url, harbor, harborHarness, path.join(dir, 'coordinator-harbor', 'state'));
        removeTree(path.join(dir, 'coordinator-harbor'));
        const hw = await worker(url, 'two', ['--sandbox', 'bwrap', '--environment', 'host'], harborHarness);
        expect(hw.code, hw.stderr).toBe(0);
        const hs = (await pg.query(`SELECT status, reward, error FROM samples WHERE rollout_id = $1`, [harborRollout])).rows;
        expect(hs.map((s) => [s.status, s.reward, s.error])).toEqual([
          ['completed', 1, null],
          ['completed', 1, null],
        ]);
      } finally {
        await pg.close();
      }
    },
    patient(480_000),
  );
});
