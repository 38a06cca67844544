import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { findBwrap, sandboxInsidePaths } from '../../src/sandbox/index.js';
import { cgroupSupport } from '../../src/sandbox/limits.js';
import { Store } from '../../src/store/store.js';
import { writeRolloutTasks } from '../support/agent-rollout.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The sandbox as a rollout wires it, through the CLI: each stage gets its own view (setup and agent
 * never see the task file's folder, the evaluator does), a sample that hits a cap ends as error with
 * the reason while its siblings finish, and a task may ask for the host network.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
const bwrap = findBwrap();

describe.skipIf(!bwrap)('rollout in the bwrap sandbox (skipped: bubblewrap is not installed; apt-get install bubblewrap)', () => {
  let dir: string;
  let mock: MockServer;
  let other: http.Server;
  let otherPort: number;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-sbx-rollout-'));
    mock = await startMockServer({});
    other = http.createServer((_req, res) => res.end('1\n'));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    otherPort = (other.address() as { port: number }).port;
  });
  afterAll(async () => {
    await mock?.close();
    other?.close();
    removeTree(dir);
  });

  /** A task file in its own folder (beside a hidden checker), and a rollout of it with a shell-script harness. */
  async function rollout(
    name: string,
    tasks: Record<string, unknown>[],
    extra: string[] = [],
  ): Promise<{ summary: Record<string, unknown> & { rolloutId: string }; store: Store }> {
    const tasksDir = path.join(dir, name);
    fs.mkdirSync(tasksDir);
    fs.writeFileSync(path.join(tasksDir, 'checker.sh'), 'test -f saw.txt && grep -q hidden-not-seen saw.txt && test ! -e setup-saw.txt && echo 1 || echo 0\n');
    const file = writeRolloutTasks(path.join(tasksDir, 'tasks.jsonl'), tasks);
    const db = path.join(dir, `${name}.db`);
    const args = [
      BIN,
      'rollout',
      '--tasks',
      file,
      '--harness',
      'custom',
      '--command',
      'bash -c {prompt}',
      '--upstream',
      mock.url,
      '--db',
      db,
      '--samples',
      '1',
      '--sandbox',
      'bwrap',
      '--out',
      path.join(dir, `out-${name}`),
      '--json',
      ...extra,
    ];
    const r = await run(process.execPath, args, { env: { ...process.env, NO_COLOR: '1' }, timeout: patient(120_000) }).catch((err: { stdout: string }) => err);
    return { summary: JSON.parse(r.stdout), store: Store.open(db) };
  }

  function samplesByTask(store: Store, rolloutId: string) {
    return new Map(store.rollouts.samples(rolloutId).map((s) => [s.taskId, s]));
  }

  it('setup and agent never see the task folder; the evaluator does, after the agent ended', async () => {
    const tasksDir = path.join(dir, 'views');
    const { summary, store } = await rollout('views', [
      {
        id: 'view',
        setup: [`test -e ${tasksDir}/checker.sh && touch setup-saw.txt; true`],
        prompt: `curl -sf -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}' "$OPENAI_BASE_URL/chat/completions" > /dev/null || exit 7; test -e ${tasksDir}/checker.sh && echo seen > saw.txt || echo hidden-not-seen > saw.txt`,
        evaluator: { type: 'command', command: 'sh "$POLAR_TASKS_DIR/checker.sh"' },
      },
    ]);
    try {
      const s = samplesByTask(store, summary.rolloutId).get('view')!;
      expect(s.error).toBeNull();
      expect(s.status).toBe('completed');
      expect(s.reward).toBe(1);
      expect(store.requests.list(s.sessionId!)).toEqual([expect.objectContaining({ status: 'ok' })]);
    } finally {
      store.close();
    }
  });

  it('setup, agent and evaluator see the workspace at one fixed path, so what the agent built with its path in it still runs for the evaluator', async () => {
    const fixed = sandboxInsidePaths().workspace;
    const { summary, store } = await rollout('fixed-path', [
      {
        id: 'fixed',
        setup: ['pwd > setup-pwd.txt'],
        // An absolute link, as an editable install or a virtualenv leaves: it names the path the agent saw.
        prompt: `pwd > agent-pwd.txt; echo "$HOME" > agent-home.txt; printf '#!/bin/sh\\necho 1\\n' > tool.sh; chmod +x tool.sh; ln -s "$(pwd)/tool.sh" abs-tool`,
        evaluator: {
          type: 'command',
          command: 'cat setup-pwd.txt agent-pwd.txt agent-home.txt; echo "$POLAR_WORKSPACE"; pwd; ./abs-tool',
        },
      },
    ]);
    try {
      const s = samplesByTask(store, summary.rolloutId).get('fixed')!;
      expect(s.error).toBeNull();
      expect(s.reward).toBe(1);
      const output = (s.evaluator as { output: string }).output.trim().split('\n');
      expect(output).toEqual([fixed, fixed, sandboxInsidePaths().home, fixed, fixed, '1']);
    } finally {
      store.close();
    }
  });

  it.skipIf(cgroupSupport() === null)(
    'a fork bomb, a memory hog and a huge file score their own samples 0 with the reason, never error; siblings are rewarded, and a flood of output stops at the cap in the log',
    async () => {
      const { summary, store } = await rollout(
        'limits',
        [
          { id: 'bomb', prompt: 'bomb() { bomb | bomb & }; bomb; sleep 60' },
          { id: 'hog', prompt: `node -e "const a=[]; for(;;) a.push(Buffer.alloc(16*1024*1024, 1))"; sleep 60` },
          { id: 'big', prompt: 'head -c 10G /dev/zero > big.bin; echo 1 > answer.txt' },
          { id: 'fine', prompt: 'echo 1 > answer.txt' },
          // polar writes the harness log itself, outside RLIMIT_FSIZE: it stops at the cap.
          { id: 'flood', prompt: "head -c 20000000 /dev/zero | tr '\\0' a; echo 1 > answer.txt" },
        ],
        ['--max-procs', '64', '--max-memory', '256m', '--max-file-size', '1m', '--concurrency', '5', '--timeout', String(patientSeconds(90))],
      );
      try {
        const s = samplesByTask(store, summary.rolloutId);
        // The agent's own cap is its own failure (issue 39): 0 with the reason, never `error`, which
        // would drop the sample from its GRPO group.
        const forfeit = (id: string) => [s.get(id)!.status === 'error', s.get(id)!.reward, String(s.get(id)!.evaluator?.forfeit)];
        expect(forfeit('bomb')).toEqual([false, 0, 'the agent hit its own cap: process limit 64 reached']);
        expect(forfeit('hog')).toEqual([false, 0, 'the agent hit its own cap: memory limit 256 MiB reached (a process was OOM-killed)']);
        expect(forfeit('big').slice(0, 2)).toEqual([false, 0]);
        expect(forfeit('big')[2]).toMatch(/^the agent hit its own cap: file size limit 1 MiB exceeded/);
        expect([s.get('fine')!.status, s.get('fine')!.reward]).toEqual(['completed', 1]);
        expect([s.get('flood')!.status, s.get('flood')!.reward]).toEqual(['completed', 1]);
        const log = store.sessions.get(s.get('flood')!.sessionId!)!.metadata.log_file as string;
        expect(fs.statSync(log).size).toBeLessThan(1024 * 1024 + 64 * 1024);
        expect(fs.readFileSync(log, 'utf8')).toMatch(/the log stops here, at its cap of 1048576 bytes/);
      } finally {
        store.close();
      }
    },
  );

  it("polar's own git after setup and on the agent's workspace runs sandboxed: a clean filter planted in .git/config never runs on the host", async () => {
    const marker = path.join(dir, 'filter-ran-on-host');
    const plant = `git init -q 2>/dev/null; git config filter.evil.clean "sh -c 'touch ${marker}; cat'" && echo '* filter=evil' > .gitattributes`;
    const { summary, store } = await rollout('git-filter', [
      { id: 'filter', prompt: `${plant} && echo hi > f.txt && echo 1 > answer.txt` },
      // A setup command (a task from gym-agent's network rows, say) plants it before the baseline commit.
      { id: 'setup-filter', setup: [plant, 'echo base > base.txt'], prompt: 'echo 1 > answer.txt' },
    ]);
    try {
      const s = samplesByTask(store, summary.rolloutId).get('filter')!;
      expect([s.status, s.reward]).toEqual(['completed', 1]);
      expect(s.diff).toContain('f.txt');
      const setup = samplesByTask(store, summary.rolloutId).get('setup-filter')!;
      expect([setup.status, setup.reward, setup.error]).toEqual(['completed', 1, null]);
      expect(fs.existsSync(marker)).toBe(false);
    } finally {
      store.close();
    }
  });

  it('a task that asks for the host network gets it (and the summary says so); the others reach only the proxy', async () => {
    const prompt = `curl -sf -m 5 http://127.0.0.1:${otherPort}/ > answer.txt || echo 0 > answer.txt`;
    const { summary, store } = await rollout('network', [
      { id: 'host', prompt, network: 'host' },
      { id: 'boxed', prompt },
    ]);
    try {
      const s = samplesByTask(store, summary.rolloutId);
      expect(s.get('host')!.reward).toBe(1);
      expect(s.get('boxed')!.reward).toBe(0);
      expect(summary.hostNetwork).toEqual([s.get('host')!.id]);
    } finally {
      store.close();
    }
  });
});
