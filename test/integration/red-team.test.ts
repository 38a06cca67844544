import { execFile, spawn, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, startMockServer } from '../../src/mock-server/server.js';
import type { SampleRow } from '../../src/store/rollouts.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { POLAR_BIN } from '../support/polar-cli.js';
import { explain, forgerRolloutArgs, harborCopy, type RolloutSummary, samplesByTask, shellDataset } from '../support/red-team/tasks.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The red-team suite on the host (issue 31): the forgeries that earned reward 1 without solving the
 * task, tried as a policy would, through `polar rollout` in real bwrap. The agent is a custom harness
 * standing for the policy's shell tool (test/support/red-team/forger.mjs); honest samples run in the
 * same rollout and must keep their rewards. Each forgery must score 0 with its sample `completed`
 * (an `error` would drop it out of its GRPO group instead of scoring it), or be refused with a
 * reason; each test also checks the forgery did what it tries (the checker was killed, the forged
 * line reached its stdout), so a forgery that silently failed cannot pass for a defence.
 * The container cases are test/e2e/red-team-container.test.ts.
 */
const REPO = path.resolve(__dirname, '../..');
const run = promisify(execFile);
const bwrap = findBwrap();
/**
 * The checkers run python3 and node from the host's system folders, as a machine without a version
 * manager would (sandbox-toolchains.test.ts covers one: its root is bound whole).
 */
const SYSTEM_PATH = (process.env.PATH ?? '')
  .split(':')
  .filter((p) => p !== '' && !p.startsWith(os.homedir()))
  .join(':');
const skip = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);

let dir: string;
let mock: MockServer;
/** A host folder open on fd 20 of the launching process: nothing inside may reach it. */
let hostFolder: string;
/** Where the operator's git filter would leave a trace if it ran. */
let filterMarker: string;
let jsonl: Map<string, SampleRow>;
let harbor: Map<string, SampleRow>;
let shell: Map<string, SampleRow>;
let fdOutput: string;

/** `polar rollout ARGS` with fd 20 a host folder (and HOME a home whose ~/.gitconfig defines a filter). */
async function rollout(args: string[], home: string): Promise<{ summary: RolloutSummary; stdout: string; stderr: string }> {
  const stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
  for (let fd = 3; fd <= 20; fd++) stdio.push('ignore');
  const folder = fs.openSync(hostFolder, 'r');
  stdio[20] = folder;
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(process.execPath, args, { stdio, env: { ...process.env, PATH: SYSTEM_PATH, HOME: home, NO_COLOR: '1' } });
  } finally {
    fs.closeSync(folder);
  }
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d;
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code, `${stderr}\n${stdout}`).toBe(0);
  return { summary: JSON.parse(stdout) as RolloutSummary, stdout, stderr };
}

/** A JSONL task copy whose prompt starts with `line`. */
function jsonlTask(id: string, base: 'js-slugify' | 'js-sum', line: string, workspace = `repos/${base}`): Record<string, unknown> {
  const evaluator =
    base === 'js-slugify'
      ? { type: 'command', command: 'node "$POLAR_TASKS_DIR/checks/slugify-check.cjs"', timeout: patientSeconds(30) }
      : { type: 'tests', fail_to_pass: ['node test.js'], pass_to_pass: [], timeout: patientSeconds(60) };
  return { id, prompt: `${line}\nDo the task in this folder.`, workspace: { dir: workspace }, evaluator, timeout: patientSeconds(120) };
}

describe.skipIf(skip !== null)(`red team on the host${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-red-team-'));
    hostFolder = path.join(dir, 'host-folder');
    fs.mkdirSync(hostFolder);
    fs.writeFileSync(path.join(hostFolder, 'secret.txt'), 'HOST-SECRET\n');
    filterMarker = path.join(dir, 'filter-ran');
    // The operator's ~/.gitconfig defines a filter; the task's .gitattributes names it.
    const home = path.join(dir, 'home');
    fs.mkdirSync(home);
    const filter = path.join(dir, 'filter.sh');
    fs.writeFileSync(filter, `#!/bin/sh\necho "$1" >> ${filterMarker}\ncat\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(home, '.gitconfig'), `[filter "redteam"]\n\tclean = ${filter} clean\n\tsmudge = ${filter} smudge\n`);
    mock = await startMockServer({ seed: 1 });

    // JSONL tasks: the command evaluator (slugify-check.cjs) and the tests evaluator (js-sum).
    const tasks = path.join(dir, 'jsonl');
    fs.cpSync(path.join(REPO, 'fixtures/tasks/checks'), path.join(tasks, 'checks'), { recursive: true });
    for (const repo of ['js-slugify', 'js-sum']) fs.cpSync(path.join(REPO, 'fixtures/tasks/repos', repo), path.join(tasks, 'repos', repo), { recursive: true });
    fs.cpSync(path.join(tasks, 'repos/js-sum'), path.join(tasks, 'repos/js-sum-filter'), { recursive: true });
    fs.writeFileSync(path.join(tasks, 'repos/js-sum-filter/.gitattributes'), '*.txt filter=redteam\n*.js filter=redteam\n');
    const rows = [
      jsonlTask('slugify-honest', 'js-slugify', 'SOLVE js-slugify'),
      jsonlTask('slugify-pidfd', 'js-slugify', 'FORGE pidfd-checker'),
      jsonlTask('sum-honest', 'js-sum', 'SOLVE js-sum'),
      jsonlTask('sum-edit-test', 'js-sum', 'FORGE edit-test'),
      jsonlTask('sum-git-filter', 'js-sum', 'FORGE git-filter', 'repos/js-sum-filter'),
      jsonlTask('inherited-fd', 'js-slugify', 'FORGE inherited-fd'),
    ];
    fs.writeFileSync(path.join(tasks, 'tasks.jsonl'), `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);

    // Harbor tasks: the fixtures' JS and Python checkers, the agent's module in their child.
    const ds = path.join(dir, 'harbor');
    harborCopy(ds, 'js-fix-slugify', 'js-honest', 'SOLVE js-fix-slugify');
    harborCopy(ds, 'js-fix-slugify', 'js-kill-checker', 'FORGE kill-checker-js');
    harborCopy(ds, 'js-fix-slugify', 'js-self-error', 'FORGE self-error');
    harborCopy(ds, 'py-fix-median', 'py-honest', 'SOLVE py-fix-median');
    harborCopy(ds, 'py-fix-median', 'py-kill-checker', 'FORGE kill-checker-py');
    // The checker made non-dumpable first thing, as the README's threat model asks of a checker that
    // runs the agent's code as its own user: its child may no longer open /proc/PPID/mem.
    harborCopy(ds, 'py-fix-median', 'py-mem-patch', 'FORGE mem-patch-py');
    const check = path.join(ds, 'py-mem-patch/tests/check.py');
    const nonDumpable = 'import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0\n';
    fs.writeFileSync(check, fs.readFileSync(check, 'utf8').replace(/^import /m, `${nonDumpable}import `));
    // The shell tasks of the container suite, here with the oracle running each forgery.
    const shellDs = path.join(dir, 'shell');
    shellDataset(shellDs);

    const common = (tasksPath: string, name: string) => ({
      tasks: tasksPath,
      upstream: mock.url,
      db: path.join(dir, `${name}.db`),
      out: path.join(dir, `out-${name}`),
    });
    const sandbox = ['--sandbox', 'bwrap', '--environment', 'host'];
    const a = await rollout(forgerRolloutArgs({ ...common(path.join(tasks, 'tasks.jsonl'), 'jsonl'), extra: [...sandbox, '--keep-workspaces'] }), home);
    jsonl = samplesByTask(path.join(dir, 'jsonl.db'), a.summary.rolloutId);
    fdOutput = a.stderr;
    const b = await rollout(forgerRolloutArgs({ ...common(ds, 'harbor'), extra: sandbox }), home);
    harbor = samplesByTask(path.join(dir, 'harbor.db'), b.summary.rolloutId);
    const c = await rollout(
      [
        POLAR_BIN,
        'rollout',
        '--tasks',
        shellDs,
        '--harness',
        'oracle',
        '--samples',
        '1',
        '--concurrency',
        '2',
        '--db',
        path.join(dir, 'shell.db'),
        '--out',
        path.join(dir, 'out-shell'),
        '--json',
        ...sandbox,
      ],
      home,
    );
    shell = samplesByTask(path.join(dir, 'shell.db'), c.summary.rolloutId);
  }, patient(400_000));

  afterAll(async () => {
    await mock?.close();
    if (dir) removeTree(dir);
  });

  /** Scored 0, completed (not error), and the reason is the checker's death. */
  function forfeited(s: SampleRow | undefined, reason: RegExp): void {
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(String(s!.evaluator?.forfeit ?? ''), explain(s)).toMatch(reason);
  }

  it('honest samples in the same rollouts keep their rewards', () => {
    for (const [samples, ids] of [
      [jsonl, ['slugify-honest', 'sum-honest']],
      [harbor, ['js-honest', 'py-honest']],
      [shell, ['honest']],
    ] as const) {
      for (const id of ids) {
        const s = samples.get(id);
        expect(s?.status, explain(s)).toBe('completed');
        expect(s!.reward, explain(s)).toBe(1);
      }
    }
  });

  it('1. Harbor: a module that writes reward 1 and SIGKILLs its checker scores 0 (JS and Python checkers)', () => {
    forfeited(harbor.get('js-kill-checker'), /killed by SIGKILL|exited 137/);
    forfeited(harbor.get('py-kill-checker'), /killed by SIGKILL|exited 137/);
  });

  it('2. command evaluator: a child that prints {"reward": 1} on its checker\'s stdout and kills it scores 0', () => {
    const s = jsonl.get('slugify-pidfd');
    forfeited(s, /killed by SIGKILL|exited 137/);
    // The forged line reached the checker's stdout: the defence, not a failed attack, kept it out.
    expect(String(s!.evaluator?.output), explain(s)).toContain('{"reward": 1}');
  });

  it("3. tests evaluator: test.js rewritten to exit 0 is reset to the task's and the wrong sum.js fails", () => {
    const s = jsonl.get('sum-edit-test');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(s!.diff).toMatch(/\+\+\+ b\/test\.js[\s\S]*\+process\.exit\(0\);/);
    expect(s!.evaluator?.reset_test_files).toEqual(['test.js']);
  });

  it("4. a replaced /usr/bin/bash cannot run the verifier: the host's system folders are read-only to the agent", () => {
    const s = shell.get('fake-bash');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(s!.diff).toContain('could not replace /usr/bin/bash');
  });

  it("5. a loop the agent's program detaches during verification dies with test.sh: reward 0", () => {
    const s = shell.get('verify-daemon');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(String(s!.evaluator?.output), explain(s)).toContain('program: a loop waits for test.sh');
    expect(String(s!.evaluator?.output), explain(s)).toContain('test.sh wrote 0');
  });

  it("6. a host folder on fd 20 of the process that starts polar is out of the agent's reach", () => {
    const s = jsonl.get('inherited-fd');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    const line = /^\+(\{.*\})$/m.exec(s!.diff ?? '');
    expect(line, s!.diff ?? '').not.toBeNull();
    const report = JSON.parse(line![1]!) as { links: Record<string, string>; read: unknown; wrote: boolean };
    // Node's own descriptors (its event loop, its pipes) are there; fd 20 and the folder are not.
    expect(Object.keys(report.links)).not.toContain('20');
    expect(Object.values(report.links).filter((l) => l.includes(path.basename(dir)))).toEqual([]);
    expect(report.read).toMatch(/^refused/);
    expect(report.wrote).toBe(false);
    expect(fs.readdirSync(hostFolder)).toEqual(['secret.txt']);
    expect(fdOutput).not.toContain('HOST-SECRET');
  });

  it("a checker's child rewriting the checker's memory through /proc/PPID/mem is refused once the checker is non-dumpable", () => {
    const s = harbor.get('py-mem-patch');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(String(s!.evaluator?.output), explain(s)).toContain('refused: PermissionError');
  });

  it("7. the operator's git filter named by the task's .gitattributes never runs on the agent's diff", () => {
    const s = jsonl.get('sum-git-filter');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(s!.diff).toContain('+the filter should never see this');
    expect(fs.existsSync(filterMarker)).toBe(false);
  });

  it('7. an agent that kills its checker before any reward is written turns its failure into 0, not error', () => {
    forfeited(harbor.get('js-self-error'), /killed by SIGKILL|exited 137/);
  });

  it(
    '7. a symlinked folder in environment/ is refused at load with a reason; nothing of the host reaches a workspace',
    async () => {
      const ds = path.join(dir, 'symlink');
      harborCopy(ds, 'js-fix-slugify', 'linked', 'SOLVE js-fix-slugify');
      const env = path.join(ds, 'linked/environment');
      fs.symlinkSync(hostFolder, path.join(env, 'data'));
      fs.appendFileSync(path.join(env, 'Dockerfile'), 'COPY data/ ./data/\n');
      const out = path.join(dir, 'out-symlink');
      const r = await run(
        process.execPath,
        [
          POLAR_BIN,
          'rollout',
          '--tasks',
          ds,
          '--harness',
          'oracle',
          '--samples',
          '1',
          '--sandbox',
          'bwrap',
          '--environment',
          'host',
          '--db',
          path.join(dir, 'symlink.db'),
          '--out',
          out,
          '--keep-workspaces',
        ],
        {
          env: { ...process.env, NO_COLOR: '1' },
        },
      ).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/Dockerfile[\s\S]*(link|outside)/i);
      const written = fs.existsSync(out) ? fs.readdirSync(out, { recursive: true }).map(String) : [];
      expect(written.filter((f) => f.includes('secret'))).toEqual([]);
    },
    patient(60_000),
  );
});
