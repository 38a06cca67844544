import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveHarnessBin } from '../../src/harness/resolve.js';
import type { Harness } from '../../src/harness/types.js';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy } from '../support/start-proxy.js';
import { customRunArgs, expectSessionCapturedExactly, polarRun, spawnPolar, workspace, type Workspace } from './support.js';
import { patientSeconds } from '../support/patience.js';
import { waitUntil } from '../support/wait.js';

/** A minimal real agent: N chat calls to the base URL polar gives every custom harness. */
const AGENT = `
const n = Number(process.argv[2] ?? 3);
for (let i = 0; i < n; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'call ' + i }] }),
  });
  if (!res.ok) process.exit(3);
  await res.json();
}
`;

let upstream: ReferenceUpstream;
let w: Workspace;
let agent: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  w = workspace();
  // Beside the workspace, so a sandboxed run sees it only through --sandbox-ro, as a user would pass it.
  agent = path.join(w.dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
});
afterAll(async () => {
  await upstream?.close();
  w?.cleanup();
});

const alive = (marker: string) => {
  try {
    // Anchored, so polar's own command line (which contains the marker) does not count.
    return execFileSync('pgrep', ['-f', `^${marker}`], { encoding: 'utf8' }).trim().length > 0;
  } catch {
    return false;
  }
};
const session = (id: string) => {
  const store = Store.open(w.db, { readonly: true });
  try {
    return store.sessions.summary(id);
  } finally {
    store.close();
  }
};

/** `polar run` options for a custom harness against the reference upstream, recorded in the workspace's database. */
const local = (command: string, session: string, extra: string[] = []) =>
  customRunArgs({ command, via: ['--upstream', upstream.url], ws: w.ws, db: w.db, session, extra });

describe('polar run lifecycle', () => {
  it('a custom harness makes its calls through polar; the run reports and records them', async () => {
    const r = await polarRun(local(`${process.execPath} ${agent} 3`, 'custom-1', ['--sandbox-ro', agent]));
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/session custom-1 completed \(exit 0\): 3 calls/);
    // stdout: a readable line per call (the harness's own output is in the log file).
    expect(r.stdout.trim().split('\n')).toEqual(
      [1, 2, 3].map((n) => expect.stringMatching(new RegExp(`^call ${n}  openai-chat  [\\d,]+ → [\\d,]+ tokens  \\w+  `))),
    );
    expect(session('custom-1')).toMatchObject({ harness: 'custom', status: 'completed', requests: 3, failed: 0 });
    expect(expectSessionCapturedExactly(w.db, 'custom-1', upstream)).toBe(3);
  });

  it("--proxy uses a running polar proxy: the calls land in its database under the run's session", async () => {
    const proxy = await startTestProxy(upstream.url);
    try {
      const r = await polarRun(
        customRunArgs({
          command: `${process.execPath} ${agent} 2`,
          via: ['--proxy', proxy.proxy.baseUrl(), '--model', 'Qwen/Qwen3-8B'],
          ws: w.ws,
          db: proxy.dbPath,
          session: 'via-proxy',
          extra: ['--sandbox-ro', agent],
        }),
      );
      expect(r.code, r.stderr).toBe(0);
      // Calls recorded by another process are read back from the database, a line each.
      expect(r.stdout.trim().split('\n')).toEqual([1, 2].map((n) => expect.stringMatching(new RegExp(`^call ${n}  openai-chat  [\\d,]+ → [\\d,]+ tokens  `))));
      expect(proxy.store.sessions.summary('via-proxy')).toMatchObject({ harness: 'custom', status: 'completed', requests: 2, failed: 0 });
      expect(expectSessionCapturedExactly(proxy.dbPath, 'via-proxy', upstream)).toBe(2);
    } finally {
      await proxy.close();
    }
  });

  it('--timeout ends the whole process tree and keeps the partial session as timeout', async () => {
    // Each sleep leaves a marker if it runs to its end; polar must end both first (an order of
    // events: the tree was ended, not waited for), whatever the machine's speed.
    const fg = path.join(w.ws, 'fg-finished');
    const bg = path.join(w.ws, 'bg-finished');
    const r = await polarRun(
      local(`${process.execPath} ${agent} 1; (sleep 61.25 && touch ${bg}) & sleep 61.25 && touch ${fg}`, 'timeout-1', [
        // Long enough for the agent's one call on a busy machine; far short of the sleeps.
        '--timeout',
        String(patientSeconds(2)),
        '--sandbox-ro',
        agent,
      ]),
    );
    expect(r.code).not.toBe(0);
    expect(session('timeout-1')).toMatchObject({ status: 'timeout', requests: 1 });
    expect(alive('sleep 61.25')).toBe(false);
    expect(fs.existsSync(fg) || fs.existsSync(bg)).toBe(false);
  });

  it('Ctrl-C is forwarded: the harness stops, the session is aborted, polar exits', async () => {
    const child = spawnPolar(['run', ...local('sleep 62.25', 'sigint-1')]);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitUntil("the harness's sleep to start", () => alive('sleep 62.25'), {
      stopIf: () => (child.exitCode !== null ? `polar run exited (${child.exitCode}) first` : null),
      everyMs: 100,
    });
    child.kill('SIGINT');
    expect(await exited).not.toBe(0);
    expect(session('sigint-1')).toMatchObject({ status: 'aborted' });
    expect(alive('sleep 62.25')).toBe(false);
  });

  it('a missing harness is an error that says how to install it', async () => {
    const fake = { name: 'codex', binName: 'polar-no-such-harness', packageName: '@openai/codex' } as unknown as Harness;
    await expect(resolveHarnessBin(fake, undefined, w.ws, '/nonexistent')).rejects.toThrow(/npm install -g @openai\/codex/);
    const r = await polarRun(['--harness', 'codex', '--harness-bin', './nope', '--upstream', upstream.url, '--prompt', 'x', '--cwd', w.ws, '--db', w.db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--harness-bin \.\/nope is not an executable file/);
  });

  it('several runs at once on one database: distinct sessions, no lost writes, no lock errors', async () => {
    const runs = await Promise.all([1, 2, 3].map((i) => polarRun(local(`${process.execPath} ${agent} 4`, `par-${i}`, ['--sandbox-ro', agent]))));
    for (const r of runs) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/locked/i);
    }
    for (const i of [1, 2, 3]) {
      expect(session(`par-${i}`)).toMatchObject({ status: 'completed', requests: 4, failed: 0 });
      expect(expectSessionCapturedExactly(w.db, `par-${i}`, upstream)).toBe(4);
    }
  });
});
