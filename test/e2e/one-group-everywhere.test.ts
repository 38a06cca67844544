import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { sampleFirstPrompt } from '../../src/rollout/first-prompts.js';
import { firstPromptText } from '../../src/rollout/group-first-prompts.js';
import { describeDifference } from '../../src/train/prompt-diff.js';
import { findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { HARNESSES, harnessRolloutArgs, nodeFor } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 38 (3), "a group is one group everywhere": the samples of one task that run on different
 * hosts of a fleet must still send one first prompt, or NeMo-RL splits the group. Each real harness
 * CLI runs the same task once from each of two "hosts" that differ in everything outside the task:
 *
 *   - another install of polar: the checkout bind-mounted at a second path in a private mount
 *     namespace (`unshare -m`), run from there (its dist/, its node_modules, its .tools/ Node);
 *   - another time zone: TZ=Pacific/Kiritimati (UTC+14) and TZ=Pacific/Pago_Pago (UTC-11), 25 hours
 *     apart, so their calendar dates always differ;
 *   - another hostname (`unshare -u`).
 *
 * Both rollouts' first calls must carry byte-identical prompt token ids. Before the fix, TZ reached
 * the harness (every harness's date) and polar's install path showed in Gemini CLI's and Pi's
 * first prompt. Root only (the bind mount needs it); bwrap only (unsandboxed runs keep the host's).
 */
const ROOT = path.resolve(__dirname, '../..');
const bwrap = findBwrap();
const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['-m', '-u', 'true']).status === 0;
let mock: MockServer;
let dir: string;
let tasks: string;
let secondInstall: string;

interface Host {
  name: string;
  tz: string;
  /** Where polar is installed on this host: the checkout itself, or a bind mount of it. */
  install: string;
}

beforeAll(async () => {
  if (!bwrap || !canUnshare) return;
  mock = await startMockServer({ log: false, script: () => ({ content: 'done' }) });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-one-group-'));
  tasks = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(
    tasks,
    `${JSON.stringify({ id: 'greet', prompt: 'Reply with the word done.', workspace: { empty: true }, evaluator: { type: 'command', command: 'true' } })}\n`,
  );
  // The mount point only: the mount exists inside each run's own namespace, never on this machine.
  secondInstall = path.join(dir, 'elsewhere', 'polar');
  fs.mkdirSync(secondInstall, { recursive: true });
});
afterAll(async () => {
  await mock?.close();
  if (dir) removeTree(dir);
});

/** A path of this checkout as `host` has it. */
const at = (host: Host, p: string) => (p === ROOT || p.startsWith(`${ROOT}/`) ? host.install + p.slice(ROOT.length) : p);

/**
 * One sample of the task by `harness` on `host`: `polar rollout` run from the host's install, with
 * its TZ, its hostname and its PATH (npm's `node_modules/.bin` of that install), in its own mount
 * and UTS namespaces. Returns the first prompt's ids and its text.
 */
async function firstPrompt(harness: string, host: Host, node: string | null): Promise<{ ids: number[]; text: string }> {
  const db = path.join(dir, `${harness}-${host.name}.db`);
  const extra = ['--model', mock.model, '--sandbox', 'bwrap', '--out', path.join(dir, `${harness}-${host.name}`), ...(node ? ['--node', at(host, node)] : [])];
  const args = harnessRolloutArgs({ tasks, harness, upstream: mock.url, samples: 1, db, extra });
  const mount = host.install === ROOT ? '' : 'mount --bind "$1" "$2" && ';
  const script = `hostname "$0" && ${mount}shift 2 && exec "$@"`;
  const pathEnv = (process.env.PATH ?? '')
    .split(path.delimiter)
    .map((p) => at(host, p))
    .join(path.delimiter);
  const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'unshare',
      [
        '-m',
        '-u',
        '--propagation',
        'private',
        'sh',
        '-c',
        script,
        host.name,
        ROOT,
        host.install,
        process.execPath,
        path.join(host.install, 'bin/polar.js'),
        ...args,
      ],
      { env: { ...process.env, NO_COLOR: '1', TZ: host.tz, PATH: pathEnv }, timeout: patient(280_000), maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  // --json puts a refusal on stdout: both say why a run did not start.
  expect(r.code, `${r.stderr}\n${r.stdout}`).toBe(0);
  const store = Store.open(db, { readonly: true });
  try {
    const sessions = store.sessions.list();
    expect(sessions).toHaveLength(1);
    const rows = store.requests.tokens(sessions[0]!.id);
    const first = sampleFirstPrompt(rows);
    if ('unchecked' in first) throw new Error(`${harness} on ${host.name}: ${first.unchecked}`);
    return { ids: [...first.ids], text: firstPromptText(store, rows) ?? '' };
  } finally {
    store.close();
  }
}

describe.each(HARNESSES)('polar rollout --harness $name from two hosts (install path, TZ, hostname)', (h) => {
  const { node, skip } = nodeFor(h);

  it.skipIf(skip || !bwrap || !canUnshare)('sends byte-identical first-prompt token ids from both', { timeout: patient(300_000) }, async () => {
    const a = await firstPrompt(h.name, { name: 'polar-host-a', tz: 'Pacific/Kiritimati', install: ROOT }, node);
    const b = await firstPrompt(h.name, { name: 'polar-host-b', tz: 'Pacific/Pago_Pago', install: secondInstall }, node);
    expect(a.ids.length).toBeGreaterThan(100);
    expect(b.ids, describeDifference(a.text, b.text, ['host a', 'host b'])?.summary ?? 'same text, other ids').toEqual(a.ids);
  });
});
