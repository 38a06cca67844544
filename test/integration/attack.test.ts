import { type ChildProcess, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../../src/sandbox/index.js';
import { startMockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { cgroupSupport } from '../../src/sandbox/limits.js';
import { Store } from '../../src/store/store.js';
import { nodeAgentHarness, POLAR_BIN } from '../support/polar-cli.js';
import { endChild } from '../support/end-child.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The attack suite (issue 24): the agent under training is an adversary. A custom-harness agent
 * (test/support/attacker/agent.mjs) runs inside a real bwrap rollout against the mock model. On the
 * fixture tasks it is honest; on the attack tasks it tries every escape we know of and reports what
 * happened, and the test checks the host besides. Each escape must fail, the honest samples must
 * end with their own rewards, and their exported traces must be byte-equal to those of a rollout
 * run without the attacker.
 *
 * Two rollouts, one after the other, each against its own mock model (the mock alternates correct
 * and wrong solutions per task in arrival order, so a shared one would hand the second rollout
 * different choices): `baseline` (the honest tasks alone) and `attacked` (the same tasks plus the
 * attack tasks).
 */
const REPO = path.resolve(__dirname, '../..');
const REPO_TASKS = path.join(REPO, 'fixtures/tasks');
const AGENT_SRC = path.resolve(__dirname, '../support/attacker/agent.mjs');
const run = promisify(execFile);
const bwrap = findBwrap();

/** Honest fixture tasks: an empty workspace, a hidden checker under $POLAR_TASKS_DIR, a setup command. */
const HONEST = ['create-greeting', 'js-slugify', 'js-count'];
/**
 * Resource attacks. A 10 GB file meets RLIMIT_FSIZE, which binds everywhere. The others need the
 * sample's cgroup: without a writable one, root has no process or memory cap, and a fork bomb would
 * take the machine the tests run on, so they run only where a cgroup can be made.
 */
const FILE_ATTACKS = ['big-file'] as const;
const CGROUP_ATTACKS = ['fork-bomb', 'memory-hog', 'cpu-spin'] as const;
const cgroups = bwrap !== null && cgroupSupport() !== null;
const RESOURCE_ATTACKS = [...FILE_ATTACKS, 'stdout-flood', ...(cgroups ? CGROUP_ATTACKS : [])];
const SAMPLES = 2;
/** Small caps, so each resource attack ends in seconds; the honest samples fit well inside them. */
const LIMITS = { maxProcs: 256, maxMemory: '256m', maxFileSize: '64m', maxCpuSeconds: 8 };

interface Rollout {
  db: string;
  outDir: string;
  rolloutId: string;
  summary: Record<string, unknown> & { outcomes: Record<string, number> };
  stderr: string;
}

interface AttackReport {
  session: string | null;
  ownCall: { status: number };
  hiddenChecker: { escaped: boolean; reads: unknown[]; canaries: unknown[]; envTasksDir: string | null };
  databases: { escaped: boolean; found: string[] };
  ssh: {
    escaped: boolean;
    realHome: { listable: boolean; entries: string[] };
    realSsh: { listable: boolean; entries: string[] };
    etcShadow: { readable: boolean };
    credentials: string[];
  };
  root: { entries: string[]; repo: string[] };
  workspaces: { escaped: boolean; others: string[] };
  writeOutside: { attempts: { path: string; written: boolean }[] };
  loopback: { escaped: boolean; other: { connected: boolean }; upstream: { connected: boolean }; v6: { connected: boolean } };
  network: { escaped: boolean; hostAddress: { connected: boolean }; outside: { connected: boolean }; dns: boolean; interfaces: string[] };
  discovered: { escaped: boolean; ids: string[]; keys: number };
  envLeak: { escaped: boolean; hits: string[] };
  git: { planted: boolean };
  nestedUserns: { escaped: boolean; output: string };
  masterKeys: { escaped: boolean; reads: { path: string; readable: boolean }[] };
  admin: { escaped: boolean; statuses: Record<string, number> };
  siblingCalls: { escaped: boolean; sibling?: string; statuses?: Record<string, number>; shapes?: Record<string, string>; error?: string };
  daemon: { started: boolean };
}

let root: string;
let tasksDir: string;
let userHome: string;
let agentDir: string;
let canary: string;
let marker: string;
let listener: net.Server;
const listenerSaw: string[] = [];
let hostAddress: string | null;
let baseline: Rollout;
let attacked: Rollout;
const reports: AttackReport[] = [];
/** Processes with the daemon's marker seen after the escape samples ended, while the rollout ran on. */
const daemonsAfterEnd: string[] = [];
const evaluatorOutputs: string[] = [];
let checkerBefore: string;
/** The rollout now running, if any. */
let rolloutChild: ChildProcess | undefined;
/**
 * Set by afterAll: a beforeAll that timed out is not stopped by vitest, and went on to start the
 * next rollout after afterAll had ended the last one (an orphan writing into a removed folder).
 */
let suiteEnding = false;

/** The rollout's command line; limits and the agent's read-only folder where this polar has them. */
function rolloutArgs(tasks: string, db: string, outDir: string): string[] {
  const args = [POLAR_BIN, 'rollout', '--tasks', tasks, ...nodeAgentHarness(path.join(agentDir, 'agent.mjs')), '--db', db, '--out', outDir];
  args.push('--samples', String(SAMPLES), '--concurrency', '2', '--sandbox', 'bwrap', '--keep-workspaces', '--json');
  // The agent's folder is in no view of its own: a custom harness's script is passed in read-only.
  args.push(
    '--sandbox-ro',
    agentDir,
    '--max-procs',
    String(LIMITS.maxProcs),
    '--max-memory',
    LIMITS.maxMemory,
    '--max-file-size',
    LIMITS.maxFileSize,
    '--max-cpu-seconds',
    String(LIMITS.maxCpuSeconds),
  );
  return args;
}

/**
 * Runs one rollout to its end. While it runs, drops a sibling's session id into each attack
 * workspace once an honest session exists: the worst case of an attacker that learned an id
 * somehow (ids are not secrets; only the per-session key may open a session).
 */
async function rollout(name: string, tasks: string, upstream: string, dropSibling: boolean): Promise<Rollout> {
  if (suiteEnding) throw new Error(`not starting rollout ${name}: the suite is ending (its setup ran past its timeout)`);
  const db = path.join(root, `db-${name}`, 'polar.db');
  fs.mkdirSync(path.dirname(db));
  // A file beside the database the agent must not read.
  fs.writeFileSync(path.join(path.dirname(db), 'canary.txt'), `${canary}\n`);
  const outDir = path.join(root, `out-${name}`);
  const running = run(process.execPath, [...rolloutArgs(tasks, db, outDir), '--upstream', upstream], {
    // The invoking user's home is a planted one: the real ~/.ssh is never touched. The operator's
    // secrets (polar's upstream key, the shell's tokens) carry the canary: none may reach the agent.
    env: {
      ...process.env,
      HOME: userHome,
      NO_COLOR: '1',
      POLAR_UPSTREAM_API_KEY: `${canary}-upstream`,
      GITHUB_TOKEN: `${canary}-gh`,
      AWS_SECRET_ACCESS_KEY: `${canary}-aws`,
      HF_TOKEN: `${canary}-hf`,
    },
    timeout: patient(170_000),
    maxBuffer: 64 * 1024 * 1024,
  });
  // Held until it exits, so afterAll can end it before removing the folder it writes in (a hook that
  // timed out left it writing there: ENOTEMPTY).
  rolloutChild = running.child;
  const child = running.then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
  let finished = false;
  void child.then(() => (finished = true));
  const dropped = new Set<string>();
  while (dropSibling && !finished) {
    await new Promise((r) => setTimeout(r, 250));
    // Once both escape samples have ended, while the rollout still runs: no daemon of theirs is left.
    if (escapesEnded(db)) daemonsAfterEnd.push(...hostProcessesWith(marker));
    const sibling = honestSession(db);
    if (!sibling) continue;
    for (let i = 0; i < SAMPLES; i++) {
      const ws = path.join(outDir, 'workspaces', `escape-${i}-a1`);
      if (dropped.has(ws) || !fs.existsSync(ws)) continue;
      fs.writeFileSync(path.join(ws, 'sibling-session.txt'), sibling);
      dropped.add(ws);
    }
  }
  const r = await child;
  expect(r.stdout, `rollout ${name} printed no summary (exit ${r.code}):\n${r.stderr}`).toMatch(/^\{/);
  const summary = JSON.parse(r.stdout);
  return { db, outDir, rolloutId: summary.rolloutId, summary, stderr: r.stderr };
}

/** Whether every escape sample has ended (its sandbox is gone). */
function escapesEnded(db: string): boolean {
  return (
    withStore(db, (store) => {
      const rollout = store.rollouts.list()[0];
      const escapes = rollout ? store.rollouts.samples(rollout.id).filter((x) => x.taskId === 'escape') : [];
      return escapes.length === SAMPLES && escapes.every((x) => x.endedAt !== null);
    }) ?? false
  );
}

/** `fn` on a read-only store of `db`; null while the file is not yet a polar database. */
function withStore<T>(db: string, fn: (store: Store) => T): T | null {
  if (!fs.existsSync(db)) return null;
  let store: Store;
  try {
    store = Store.open(db, { readonly: true });
  } catch {
    return null;
  }
  try {
    return fn(store);
  } finally {
    store.close();
  }
}

/** The session of an honest sample that has one (its calls are in the database). */
function honestSession(db: string): string | null {
  return withStore(db, (store) => {
    const rollout = store.rollouts.list()[0];
    const s = rollout ? store.rollouts.samples(rollout.id).find((x) => HONEST.includes(x.taskId) && x.sessionId && x.status === 'completed') : undefined;
    return s?.sessionId ?? null;
  });
}

function honestTaskLines(): string[] {
  const lines = fs.readFileSync(path.join(REPO_TASKS, 'tasks.jsonl'), 'utf8').trim().split('\n');
  return lines.filter((l) => HONEST.includes(JSON.parse(l).id));
}

/** The host's non-loopback IPv4 address: a way off the machine's loopback the test can listen on offline. */
function firstExternalAddress(): string | null {
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return null;
}

/** Processes on the host whose command line holds `needle` (this test's own excluded). */
function hostProcessesWith(needle: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(needle)) found.push(`${pid}: ${cmd}`);
    } catch {
      // gone
    }
  }
  return found;
}

/** The first `bytes` of a file, without reading a flooded one whole. */
function head(file: string, bytes: number): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    return buf.subarray(0, fs.readSync(fd, buf, 0, bytes, 0)).toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

function open(db: string): Store {
  return Store.open(db, { readonly: true });
}

/** Every line of a session's harness log (the agent's stdout and stderr). */
function harnessLog(store: Store, sessionId: string): string {
  const file = store.sessions.get(sessionId)?.metadata.log_file;
  return typeof file === 'string' && fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
}

/**
 * A rollout's honest traces, as comparable text. What must differ between two runs is replaced:
 * session, rollout, sample and group ids (new per run), times and durations (the clock), and the
 * tool-call ids the mock makes from its global reply counter (the attacker's own calls shift it).
 * Everything the model saw and sampled (token ids, logprobs, masks, messages, rewards,
 * advantages) stays as it is. Sorted, so the order in which samples finished does not matter.
 */
async function honestTraces(r: Rollout): Promise<string[]> {
  const { stdout } = await run(process.execPath, [POLAR_BIN, 'export', '--db', r.db, '--rollout', r.rolloutId], { maxBuffer: 256 * 1024 * 1024 });
  const ids: Map<string, string> = new Map();
  return stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((t) => HONEST.includes(String(t.task_id)))
    .map((t) => normalise(t, ids))
    .map((t) => JSON.stringify(t))
    .sort();
}

const VOLATILE_KEYS =
  /(^|_)(at|ms|time|started|ended|created|duration)$|^(session_id|rollout_id|group_id|sample_id|trace_id|request_ids?|call_ids?|id|tool_call_id)$/;

function normalise(value: unknown, ids: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => normalise(v, ids));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = VOLATILE_KEYS.test(k) && (typeof v === 'string' || typeof v === 'number' || v === null || Array.isArray(v)) ? '<volatile>' : normalise(v, ids);
    return out;
  }
  // Ids inside text (a trace id that embeds its session id, a group id `rol_…/task`).
  if (typeof value === 'string') return value.replace(/\b(ses|rol|smp|req|trc|aud)_[A-Za-z0-9]+/g, '$1_<id>').replace(/\b\d+x\b/g, '<callid>');
  return value;
}

describe.skipIf(!bwrap)(
  `attack suite: an adversarial agent inside a bwrap rollout${bwrap ? '' : ' (skipped: bubblewrap is not installed; apt-get install bubblewrap)'}`,
  () => {
    beforeAll(async () => {
      root = fs.mkdtempSync(path.join(os.tmpdir(), 'atk-'));
      canary = `CANARY-${randomBytes(8).toString('hex')}`;
      marker = `atkdaemon${randomBytes(4).toString('hex')}`;

      // The task folder: the fixture repos and the hidden checker, a canary beside them.
      tasksDir = path.join(root, 'tasks');
      fs.cpSync(path.join(REPO_TASKS, 'repos'), path.join(tasksDir, 'repos'), { recursive: true });
      fs.cpSync(path.join(REPO_TASKS, 'checks'), path.join(tasksDir, 'checks'), { recursive: true });
      fs.writeFileSync(path.join(tasksDir, 'canary.txt'), `${canary}\n`);
      checkerBefore = fs.readFileSync(path.join(tasksDir, 'checks/slugify-check.cjs'), 'utf8');
      // The invoking user's home, planted: a fake key the agent must not read.
      userHome = path.join(root, 'home');
      fs.mkdirSync(path.join(userHome, '.ssh'), { recursive: true, mode: 0o700 });
      fs.writeFileSync(path.join(userHome, '.ssh/id_test'), `-----BEGIN FAKE KEY-----\n${canary}\n`, { mode: 0o600 });
      fs.writeFileSync(path.join(userHome, 'canary.txt'), `${canary}\n`);
      // The agent, in a folder of its own (named without "polar": its `pkill -f polar` runs last anyway).
      agentDir = path.join(root, 'agent');
      fs.mkdirSync(agentDir);
      fs.copyFileSync(AGENT_SRC, path.join(agentDir, 'agent.mjs'));

      // A loopback service that is not the proxy, listening on every address: what connects is logged.
      listener = net.createServer((socket) => {
        socket.on('data', (d) => listenerSaw.push(d.toString().trim()));
        socket.on('error', () => undefined);
      });
      // Every address (IPv6 and IPv4); a machine without IPv6 gets IPv4's only.
      await new Promise<void>((resolve, reject) => {
        listener.once('error', (err: NodeJS.ErrnoException) =>
          err.code === 'EAFNOSUPPORT' || err.code === 'EADDRNOTAVAIL' ? listener.listen(0, '0.0.0.0', resolve) : reject(err),
        );
        listener.listen(0, '::', resolve);
      });
      const loopbackPort = (listener.address() as net.AddressInfo).port;
      hostAddress = firstExternalAddress();

      const honest = honestTaskLines();
      const baselineFile = path.join(tasksDir, 'baseline.jsonl');
      fs.writeFileSync(baselineFile, `${honest.join('\n')}\n`);
      const mockA = await startMockServer({ tasks: mockTasksFrom(readTaskFile(baselineFile)), seed: 7 });
      try {
        baseline = await rollout('baseline', baselineFile, mockA.url, false);
      } finally {
        await mockA.close();
      }

      const outDir = path.join(root, 'out-attacked');
      const params = {
        canary,
        canaryFiles: [path.join(tasksDir, 'canary.txt'), path.join(root, 'db-attacked', 'canary.txt'), path.join(userHome, 'canary.txt')],
        checkerPaths: [path.join(tasksDir, 'checks/slugify-check.cjs'), path.join(REPO_TASKS, 'checks/slugify-check.cjs')],
        dbPath: path.join(root, 'db-attacked', 'polar.db'),
        userHome,
        realHome: os.userInfo().homedir,
        repoRoot: REPO,
        outDir,
        siblingFiles: HONEST.flatMap((t) =>
          [0, 1].map((i) =>
            path.join(outDir, 'workspaces', `${t}-${i}-a1`, t === 'create-greeting' ? 'greeting.txt' : t === 'js-slugify' ? 'slugify.js' : 'data.json'),
          ),
        ),
        writeTargets: [
          path.join(outDir, `escaped-${marker}`),
          path.join(outDir, 'workspaces', `escaped-${marker}`),
          path.join(tasksDir, `escaped-${marker}`),
          path.join(userHome, `escaped-${marker}`),
          path.join(root, 'db-attacked', `escaped-${marker}`),
          `/tmp/escaped-${marker}`,
          `/var/tmp/escaped-${marker}`,
        ],
        loopbackPort,
        upstreamPort: 0,
        hostAddress,
        siblingDrop: 'sibling-session.txt',
        // How long the attacker waits for that drop: an honest session must have completed first.
        siblingWaitMs: patient(60_000),
        daemonMarker: marker,
        evilVersion: `evil-${marker}`,
      };
      const attackTasks: Record<string, unknown>[] = [
        // The evaluator runs the payload the agent leaves: code the agent wrote, run with the task's files in view.
        {
          id: 'escape',
          prompt: '',
          workspace: { empty: true },
          evaluator: { type: 'command', command: 'node payload.cjs', timeout: patientSeconds(30) },
          timeout: patientSeconds(120),
        },
        ...RESOURCE_ATTACKS.map((kind) => ({
          id: kind,
          prompt: `ATTACK ${kind} {}`,
          workspace: { empty: true },
          evaluator: { type: 'session-completed' },
          timeout: patientSeconds(90),
        })),
      ];
      const mockB = await startMockServer({ tasks: mockTasksFrom(readTaskFile(baselineFile)), seed: 7 });
      params.upstreamPort = Number(new URL(mockB.url).port);
      attackTasks[0]!.prompt = `ATTACK escape ${JSON.stringify(params)}`;
      const attackedFile = path.join(tasksDir, 'attacked.jsonl');
      fs.writeFileSync(attackedFile, `${[...honest, ...attackTasks.map((t) => JSON.stringify(t))].join('\n')}\n`);
      try {
        attacked = await rollout('attacked', attackedFile, mockB.url, true);
      } finally {
        await mockB.close();
      }

      const store = open(attacked.db);
      try {
        for (const s of store.rollouts.samples(attacked.rolloutId).filter((x) => x.taskId === 'escape')) {
          const line = harnessLog(store, s.sessionId!)
            .split('\n')
            .find((l) => l.startsWith('ATTACK-REPORT '));
          expect(
            line,
            `no report in ${s.id}'s harness log (${s.status}: ${s.error}):\n${harnessLog(store, s.sessionId!).slice(-3000)}\n${attacked.stderr.slice(-2000)}`,
          ).toBeDefined();
          reports.push(JSON.parse(line!.slice('ATTACK-REPORT '.length)));
          evaluatorOutputs.push(String((s.evaluator as { output?: unknown } | null)?.output ?? ''));
        }
      } finally {
        store.close();
      }
      // For reading what each attempt saw when a case fails: POLAR_ATTACK_DUMP=file npx vitest run …
      if (process.env.POLAR_ATTACK_DUMP)
        fs.writeFileSync(process.env.POLAR_ATTACK_DUMP, JSON.stringify({ root, reports, evaluatorOutputs, listenerSaw }, null, 1));
    }, patient(200_000));

    afterAll(async () => {
      listener?.close();
      suiteEnding = true;
      await endChild(rolloutChild);
      // Whatever an escaped write left on the host outside our folder.
      for (const f of [`/tmp/escaped-${marker}`, `/var/tmp/escaped-${marker}`, `/tmp/escaped-${marker}.eval`, `/var/tmp/escaped-${marker}.eval`])
        fs.rmSync(f, { force: true });
      if (root && !process.env.POLAR_ATTACK_DUMP) removeTree(root);
    });

    it('every honest sample ends with its own reward: the same groups as the rollout without the attacker', () => {
      const rewards = (r: Rollout) => {
        const store = open(r.db);
        try {
          const by: Record<string, { status: string; rewards: (number | null)[] }> = {};
          for (const s of store.rollouts.samples(r.rolloutId).filter((x) => HONEST.includes(x.taskId))) {
            by[s.taskId] ??= { status: '', rewards: [] };
            by[s.taskId]!.rewards.push(s.reward);
            by[s.taskId]!.status += s.status === 'completed' ? '' : `${s.id}: ${s.status} ${s.error ?? ''}; `;
          }
          for (const g of Object.values(by)) g.rewards.sort();
          return by;
        } finally {
          store.close();
        }
      };
      const before = rewards(baseline);
      expect(Object.keys(before).sort()).toEqual([...HONEST].sort());
      for (const g of Object.values(before)) expect(g.status).toBe('');
      // The mock alternates a correct and a wrong solution per task: each group has both.
      for (const [task, g] of Object.entries(before)) expect(new Set(g.rewards).size, task).toBe(2);
      expect(rewards(attacked)).toEqual(before);
    });

    it('the attacker is a session like any other: its own key works', () => {
      expect(reports).toHaveLength(SAMPLES);
      for (const r of reports) expect(r.ownCall.status).toBe(200);
    });

    it('reads no hidden checker, no canary planted beside the tasks, the database or in the invoking home', () => {
      for (const r of reports) expect(r.hiddenChecker, JSON.stringify(r.hiddenChecker)).toMatchObject({ escaped: false, envTasksDir: null });
    });

    it('finds and reads no polar database, no session-key master, no admin token', () => {
      for (const r of reports) {
        expect(r.databases.found, 'readable database files').toEqual([]);
        expect(r.masterKeys.escaped, JSON.stringify(r.masterKeys)).toBe(false);
      }
    });

    it("reads no ~/.ssh or other credential: neither the invoking user's (planted) nor the real home's; no /etc/shadow", () => {
      const realHome = os.userInfo().homedir;
      // Toolchains on PATH under the home (~/.cargo/bin, ~/.pyenv/shims) are in the view by design,
      // read-only; nothing else of the home may show.
      const toolchains = new Set(
        (process.env.PATH ?? '')
          .split(':')
          .filter((d) => d.startsWith(`${realHome}/`))
          .map((d) => d.slice(realHome.length + 1).split('/')[0]!),
      );
      for (const r of reports) {
        expect(r.ssh.escaped, JSON.stringify(r.ssh)).toBe(false);
        expect(r.ssh.credentials, 'credential files readable in the real home').toEqual([]);
        expect(r.ssh.etcShadow.readable).toBe(false);
        expect(
          r.ssh.realHome.entries.filter((e) => !toolchains.has(e)),
          `${realHome} inside the sandbox`,
        ).toEqual([]);
        expect(r.ssh.realSsh.listable && r.ssh.realSsh.entries.length > 0).toBe(false);
      }
    });

    it("sees a minimal /: not the host root, and of polar's checkout only node_modules (the harnesses' install)", () => {
      const host = fs.readdirSync('/').sort();
      for (const r of reports) {
        expect(r.root.entries, 'the whole host root is visible').not.toEqual(host);
        for (const e of ['boot', 'srv', 'mnt', 'media', 'lost+found']) expect(r.root.entries).not.toContain(e);
        expect(
          r.root.repo.filter((e) => e !== 'node_modules'),
          `${REPO} inside the sandbox`,
        ).toEqual([]);
      }
    });

    it("sees no other sample's workspace", () => {
      for (const r of reports) expect(r.workspaces, JSON.stringify(r.workspaces)).toMatchObject({ escaped: false, others: [] });
    });

    it('writes nothing outside its workspace (checked on the host)', () => {
      for (const r of reports) expect(r.writeOutside.attempts.length).toBeGreaterThan(0);
      const targets = reports[0]!.writeOutside.attempts.map((a) => a.path);
      const landed = targets.flatMap((t) => [t, `${t}.eval`, `${t}.git`]).filter((t) => fs.existsSync(t));
      expect(landed, 'files the attacker, its evaluator payload or its git config wrote on the host').toEqual([]);
    });

    it('reaches no loopback port but the proxy, not the upstream directly, and no network', () => {
      for (const r of reports) {
        expect(r.loopback, JSON.stringify(r.loopback)).toMatchObject({ escaped: false });
        expect(r.network.escaped, JSON.stringify(r.network)).toBe(false);
        expect(
          r.network.interfaces.filter((i) => i !== 'lo'),
          'network interfaces besides lo',
        ).toEqual([]);
        expect(r.network.dns).toBe(false);
      }
      expect(
        listenerSaw.filter((l) => l.includes('attacker-hello')),
        'the listener heard the attacker',
      ).toEqual([]);
    });

    it("finds no sibling's session id or key in processes or polar's folders, and no operator secret in any environment", () => {
      for (const r of reports) {
        expect(r.discovered, JSON.stringify(r.discovered)).toMatchObject({ escaped: false, ids: [], keys: 0 });
        expect(r.envLeak.hits).toEqual([]);
      }
    });

    it("cannot call into a sibling's session: 401 in OpenAI's shape, audit rows, nothing in the sibling's session", () => {
      const store = open(attacked.db);
      try {
        for (const r of reports) {
          const calls = r.siblingCalls;
          expect(calls.sibling, calls.error).toMatch(/^ses_/);
          for (const [how, status] of Object.entries(calls.statuses!)) expect(status, how).toBe(401);
          // Each refusal in the caller's API's shape: OpenAI's {error}, Anthropic's {type: "error", error}.
          for (const [how, shape] of Object.entries(calls.shapes!)) expect(shape, how).toBe(how.startsWith('anthropic') ? 'error,type' : 'error');
          // Every call that named the sibling is in the audit table, each with why it was refused.
          const audit = store.audit.list({ session: calls.sibling! });
          expect(audit.length, 'audit rows naming the sibling').toBeGreaterThanOrEqual(Object.keys(calls.statuses!).length - 1);
          expect(new Set(audit.map((a) => a.reason))).toEqual(new Set(['no-key', 'no-secret', 'bad-secret', 'wrong-session']));
          // Credentials never reach the audit table in clear.
          expect(JSON.stringify(audit)).not.toMatch(/polar-ses_[A-Za-z0-9]+~[A-Za-z0-9_-]{8,}/);
          // The sibling's session holds only what its own agent sent: no call carries the attacker's text.
          for (const req of store.requests.list(calls.sibling!)) expect(JSON.stringify(store.requests.get(req.id))).not.toContain('injected by the attacker');
        }
      } finally {
        store.close();
      }
    });

    it("cannot use the proxy's admin routes: no pause, no policy version of its choosing", () => {
      for (const r of reports) {
        expect(r.admin, JSON.stringify(r.admin)).toMatchObject({ escaped: false });
        for (const [how, status] of Object.entries(r.admin.statuses)) expect([401, 403, 404], how).toContain(status);
      }
      const store = open(attacked.db);
      try {
        const versions = store.rollouts
          .samples(attacked.rolloutId)
          .flatMap((s) => (s.sessionId ? store.requests.list(s.sessionId) : []))
          .map((req) => req.policyVersion);
        expect(versions).not.toContain(`evil-${marker}`);
      } finally {
        store.close();
      }
    });

    it('cannot make a user namespace of its own inside the sandbox (capabilities there are kernel attack surface)', () => {
      for (const r of reports) expect(r.nestedUserns.escaped, r.nestedUserns.output).toBe(false);
    });

    it('`pkill -f polar`, `kill -9 -1` and a daemon harm nothing: the rollout ends, and no process outlives its sample', () => {
      expect(attacked.summary.status).toBe('completed');
      expect(daemonsAfterEnd, 'processes of the attacker alive after its sample ended').toEqual([]);
      expect(hostProcessesWith(marker), 'processes left by the attacker').toEqual([]);
      for (const r of reports) expect(r.daemon.started, 'the daemon did start inside').toBe(true);
    });

    it('the evaluator, running the code the agent left, cannot change the checker, write outside or call out', () => {
      expect(fs.readFileSync(path.join(tasksDir, 'checks/slugify-check.cjs'), 'utf8')).toBe(checkerBefore);
      expect(
        listenerSaw.filter((l) => l.includes('evaluator-hello')),
        'the listener heard the evaluator',
      ).toEqual([]);
      expect(evaluatorOutputs).toHaveLength(SAMPLES);
      for (const out of evaluatorOutputs) {
        // The payload ran (the evaluator got that far) and every attempt failed.
        const payload = JSON.parse(/PAYLOAD (\{.*\})/.exec(out)?.[1] ?? 'null');
        expect(payload, out).not.toBeNull();
        expect(payload.tamperChecker, out).not.toBe(true);
        expect(payload.loopback, out).not.toBe(true);
        // Nor any other sample's workspace, the database, or the canaries beside it and in the home.
        expect(Array.isArray(payload.siblings) ? payload.siblings : [], out).toEqual([]);
        expect(
          Object.entries(payload.reads).filter(([, v]) => v === true),
          out,
        ).toEqual([]);
      }
    });

    it("commands planted in the workspace's git config and hooks do not run outside a sandbox when polar diffs it", () => {
      for (const r of reports) expect(r.git.planted).toBe(true);
      // polar diffs with its own copy of the baseline repository (workspace.ts keepBaseline), so the
      // workspace's .git/config is never read: the clean filter planted there does not run at all.
      for (let i = 0; i < SAMPLES; i++)
        expect(fs.existsSync(path.join(attacked.outDir, 'workspaces', `escape-${i}-a1`, '.git/atk-ran')), `escape-${i}: the filter ran`).toBe(false);
      expect(
        listenerSaw.filter((l) => l.includes('git-hello')),
        'the listener heard a git hook',
      ).toEqual([]);
    });

    const resourceCase = (kind: (typeof FILE_ATTACKS)[number] | (typeof CGROUP_ATTACKS)[number]) => {
      const store = open(attacked.db);
      try {
        const samples = store.rollouts.samples(attacked.rolloutId).filter((s) => s.taskId === kind);
        expect(samples).toHaveLength(SAMPLES);
        const limit = {
          'fork-bomb': /process limit 256/i,
          'big-file': /file size limit 64/i,
          'memory-hog': /memory limit 256/i,
          'cpu-spin': /CPU time limit 8/i,
        }[kind];
        for (const s of samples) {
          // Its own cap is its own failure (issue 39): it scores 0 and stays in its GRPO group, where
          // `error` would have dropped it (a way out of a group the policy could learn to take).
          expect(s.status, `${s.id}: ${s.error}`).not.toBe('error');
          expect(s.error).toBeNull();
          expect(s.reward).toBe(0);
          expect(String(s.evaluator?.forfeit)).toMatch(limit);
          // The attack ran: this is the limit ending it, not a sample that never started.
          expect(head(store.sessions.get(s.sessionId!)?.metadata.log_file as string, 100_000)).toMatch(new RegExp(`ATTACK-START ${kind}`));
        }
        // No 10 GB file on the host: the workspace's file stopped at the cap.
        for (const s of samples) {
          const big = path.join(attacked.outDir, 'workspaces', `${kind}-${s.sampleIndex}-a1`, 'big.bin');
          if (fs.existsSync(big)) expect(fs.statSync(big).size).toBeLessThanOrEqual(64 * 1024 ** 2);
        }
      } finally {
        store.close();
      }
    };
    it("an agent flooding its own stdout (200 MB) cannot grow polar's harness log on the host past the file-size cap", () => {
      const store = open(attacked.db);
      try {
        const samples = store.rollouts.samples(attacked.rolloutId).filter((s) => s.taskId === 'stdout-flood');
        expect(samples).toHaveLength(SAMPLES);
        for (const s of samples) {
          const file = store.sessions.get(s.sessionId!)?.metadata.log_file as string;
          expect(head(file, 100_000)).toMatch(/ATTACK-START stdout-flood/);
          // polar writes this file itself, outside the sandbox's RLIMIT_FSIZE: without a cap of its own
          // an agent fills the disk (and polar's memory, which buffers what the disk has not taken yet).
          expect(fs.statSync(file).size, `${file}`).toBeLessThanOrEqual(64 * 1024 ** 2 + 1024 ** 2);
        }
      } finally {
        store.close();
      }
    });

    it.each(FILE_ATTACKS)('%s scores its own sample 0 with a forfeit naming the limit (never error), and nothing else', resourceCase);
    it.skipIf(!cgroups).each(CGROUP_ATTACKS)(
      `%s scores its own sample 0 with a forfeit naming the limit (never error), and nothing else${cgroups ? '' : ' (skipped: no writable cgroup here, and without one a fork bomb or memory hog would take the machine)'}`,
      resourceCase,
    );

    it("every honest sibling's exported traces are byte-equal to the rollout without the attacker (ids and times aside)", async () => {
      const before = await honestTraces(baseline);
      const after = await honestTraces(attacked);
      expect(before.length).toBeGreaterThanOrEqual(HONEST.length * SAMPLES);
      expect(after).toEqual(before);
    });
  },
);
