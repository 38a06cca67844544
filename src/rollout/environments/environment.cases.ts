import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../harness/env.js';
import { DEFAULT_LIMITS, type SandboxSettings } from '../../sandbox/index.js';
import { loadTasks } from '../load-tasks.js';
import { rolloutInsidePaths } from '../sandboxing.js';
import type { RolloutTask } from '../task-file.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import type { SampleEnvironment } from './types.js';

/**
 * One suite every SampleEnvironment passes (host.test.ts, container.test.ts call it), as Hono runs
 * one router suite against each router: the contract is the same whatever runs the sample. A
 * Harbor task from debian:12-slim (the image CI makes offline), with a file in WORKDIR.
 */
/**
 * What the agent leaves running writes this long after it ended, and the tests look this long after:
 * 5 s, so an engine slow under load (seen: a pod's checkpoint past 1 s on a busy machine) is still
 * in time to stop it, and a process that was not stopped still shows.
 */
const LATE_MS = 5_500;

export function describeEnvironment(
  name: string,
  opts: { skip: string | null; bwrap: string | null; open: (deps: EnvironmentDeps, spec: SampleSpec) => SampleEnvironment },
): void {
  describe.skipIf(opts.skip !== null)(`the ${name} environment${opts.skip ? ` (skipped: ${opts.skip})` : ''}`, () => {
    let dir: string;
    let task: RolloutTask;
    let n = 0;
    beforeAll(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), `polar-env-${name}-`));
      const t = path.join(dir, 'suite', 'env-task');
      fs.mkdirSync(path.join(t, 'environment', 'app'), { recursive: true });
      fs.mkdirSync(path.join(t, 'tests'), { recursive: true });
      fs.writeFileSync(path.join(t, 'task.toml'), 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n');
      fs.writeFileSync(path.join(t, 'instruction.md'), 'Change hello.txt.\n');
      fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\nCOPY app/ /app/\n');
      fs.writeFileSync(path.join(t, 'environment', 'app', 'hello.txt'), 'hello\n');
      fs.writeFileSync(path.join(t, 'tests', 'test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
      task = loadTasks(path.join(dir, 'suite'))[0]!;
    });
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

    const open = (): SampleEnvironment => {
      n++;
      return opts.open(suiteDeps(opts.bwrap!, dir), {
        task,
        sampleId: `env-${name}-${process.pid}-${n}`,
        sessionId: `ses_env${n}`,
        dir: path.join(dir, 'ws', String(n)),
      });
    };
    const agent = (env: SampleEnvironment, command: string) =>
      env.runAgentCommand(command, { env: baseEnvironment(), timeoutMs: 60_000, readOnly: [], network: 'none' });

    it('prepare: the starting state, with one baseline commit and nothing of the image’s history', async () => {
      const env = open();
      try {
        const ws = await env.prepare(Date.now() + 120_000);
        expect(fs.readFileSync(path.join(ws.dir, 'hello.txt'), 'utf8')).toBe('hello\n');
        const log = execFileSync('git', ['-C', ws.dir, 'log', '--all', '--format=%H'], { encoding: 'utf8' }).trim().split('\n');
        expect(log).toEqual([ws.baseline]);
      } finally {
        await env.dispose(false);
      }
    }, 180_000);

    it('collect: the agent’s changes as a diff, and nothing it left running writes afterwards', async () => {
      const env = open();
      try {
        const ws = await env.prepare(Date.now() + 120_000);
        const end = await agent(env, "echo changed > hello.txt; (setsid sh -c 'sleep 5; echo late > late.txt' > /dev/null 2>&1 &); true");
        expect(end.status).toBe('completed');
        const diff = await env.collect();
        expect(diff).toMatch(/\+changed/);
        expect(diff).not.toMatch(/late/);
        await new Promise((r) => setTimeout(r, LATE_MS));
        expect(fs.existsSync(path.join(ws.dir, 'late.txt'))).toBe(false);
      } finally {
        await env.dispose(false);
      }
    }, 180_000);

    it('checkpoint: between the steps of a multi-step task, the work so far as a diff; what the agent left running is gone; the next step goes on in the same place', async () => {
      const env = open();
      try {
        const ws = await env.prepare(Date.now() + 120_000);
        await agent(env, "echo step1 > hello.txt; (setsid sh -c 'sleep 5; echo late > late.txt' > /dev/null 2>&1 &); true");
        expect(await env.checkpoint()).toMatch(/\+step1/);
        await new Promise((r) => setTimeout(r, LATE_MS));
        // The second step sees the first's files, in the same environment (a container is not replaced).
        const second = await agent(env, 'cat hello.txt > seen.txt; if [ -e late.txt ]; then echo yes > late-seen.txt; fi; echo step2 >> hello.txt');
        expect(second.status).toBe('completed');
        const diff = await env.collect();
        expect(diff).toMatch(/\+step1/);
        expect(diff).toMatch(/\+step2/);
        expect(fs.readFileSync(path.join(ws.dir, 'seen.txt'), 'utf8')).toBe('step1\n');
        expect(diff).not.toMatch(/late/);
      } finally {
        await env.dispose(false);
      }
    }, 180_000);

    it('addWorkspaceFiles: a step’s files land in the workspace as the agent’s; a link the agent planted where one goes is replaced, never written through', async () => {
      const env = open();
      const outside = path.join(dir, `outside-${n}.txt`);
      fs.writeFileSync(outside, 'host file\n');
      const files = fs.mkdtempSync(path.join(dir, 'step-files-'));
      fs.mkdirSync(path.join(files, 'sub'));
      fs.writeFileSync(path.join(files, 'notes.txt'), 'from the step\n');
      fs.writeFileSync(path.join(files, 'sub', 'deep.txt'), 'deep\n');
      try {
        const ws = await env.prepare(Date.now() + 120_000);
        await agent(env, `ln -s ${outside} notes.txt; ln -s ${path.dirname(outside)} sub; true`);
        await env.checkpoint();
        await env.addWorkspaceFiles(files);
        const seen = await agent(env, 'cat notes.txt sub/deep.txt > both.txt');
        expect(seen.status).toBe('completed');
        await env.collect();
        expect(fs.readFileSync(path.join(ws.dir, 'both.txt'), 'utf8')).toBe('from the step\ndeep\n');
        expect(fs.readFileSync(outside, 'utf8')).toBe('host file\n');
        expect(fs.existsSync(path.join(path.dirname(outside), 'deep.txt'))).toBe(false);
      } finally {
        await env.dispose(false);
      }
    }, 180_000);

    it('verification: the agent’s files, not its system changes; /logs/verifier empty; read after the verifier’s tree is dead', async () => {
      const env = open();
      try {
        await env.prepare(Date.now() + 120_000);
        // The agent plants a reward and, where it can (a container's root), a file in a system folder.
        await agent(env, 'echo changed > hello.txt; echo 1 > /logs/verifier/reward.txt 2>/dev/null; echo x > /usr/bin/polar-planted 2>/dev/null; true');
        await env.collect();
        const run = await env.verification.run({
          command: [
            'ls -A /logs/verifier > /tmp/listing',
            'wc -l < /tmp/listing > /logs/verifier/count',
            'cat hello.txt > /logs/verifier/seen',
            '[ -e /usr/bin/polar-planted ] && echo present > /logs/verifier/system || echo absent > /logs/verifier/system',
            '[ -f /tests/test.sh ] && echo yes > /logs/verifier/tests',
            'echo "$HOME" > /logs/verifier/home',
            `(setsid sh -c 'sleep 0.5; echo 1 > /logs/verifier/late' > /dev/null 2>&1 &)`,
            'echo 0.5 > /logs/verifier/reward.txt',
          ].join('; '),
          what: 'the verifier',
          workspace: path.join(dir, 'ws', String(n)),
          env: baseEnvironment(),
          timeoutMs: 60_000,
          readOnly: [{ source: task.harbor!.testsDir, dest: '/tests' }],
          rewardDir: true,
          network: 'none',
        });
        expect(run.exitCode, run.stderr).toBe(0);
        const read = (f: string) => fs.readFileSync(path.join(run.rewardDir!, f), 'utf8').trim();
        expect(read('count')).toBe('0');
        expect(read('seen')).toBe('changed');
        expect(read('system')).toBe('absent');
        expect(read('tests')).toBe('yes');
        // Neutral: no host folder's name (polar's temp folders, the sample's id) inside.
        expect(read('home')).not.toMatch(/polar-sbx-|polar-env-|ses_/);
        await new Promise((r) => setTimeout(r, 1000));
        expect(fs.existsSync(path.join(run.rewardDir!, 'late'))).toBe(false);
        expect(read('reward.txt')).toBe('0.5');
        fs.rmSync(run.rewardDir!, { recursive: true, force: true });
      } finally {
        await env.dispose(false);
      }
    }, 240_000);

    it('dispose: the workspace is gone unless kept', async () => {
      const env = open();
      const ws = await env.prepare(Date.now() + 120_000);
      await env.dispose(false);
      expect(fs.existsSync(ws.dir)).toBe(false);
    }, 180_000);
  });
}

/**
 * Harbor's separate verifier (environment_mode = "separate"): only the artifacts cross, at their
 * paths, links inside them dropped; in a container, the verifier's image is tests/Dockerfile's.
 */
export function describeSeparateVerifier(
  name: string,
  opts: { skip: string | null; bwrap: string | null; open: (deps: EnvironmentDeps, spec: SampleSpec) => SampleEnvironment; fromImage: boolean },
): void {
  describe.skipIf(opts.skip !== null)(`Harbor's separate verifier in the ${name} environment${opts.skip ? ` (skipped: ${opts.skip})` : ''}`, () => {
    it('the verifier gets only the artifacts, at their paths (in a container, in tests/Dockerfile’s image)', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-env-separate-'));
      try {
        const t = path.join(dir, 'suite', 'separate');
        fs.mkdirSync(path.join(t, 'environment', 'app'), { recursive: true });
        fs.mkdirSync(path.join(t, 'tests'), { recursive: true });
        fs.writeFileSync(
          path.join(t, 'task.toml'),
          'version = "1.0"\nartifacts = ["/app/out.txt", "/app/more"]\n[verifier]\ntimeout_sec = 60.0\nenvironment_mode = "separate"\n[agent]\ntimeout_sec = 60.0\n',
        );
        fs.writeFileSync(path.join(t, 'instruction.md'), 'Write 42 to /app/out.txt.\n');
        fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\nCOPY app/ /app/\n');
        fs.writeFileSync(path.join(t, 'environment', 'app', 'hello.txt'), 'hello\n');
        // The verifier's image has its own /tests (nothing is uploaded) and a marker the agent's lacks.
        fs.writeFileSync(
          path.join(t, 'tests', 'Dockerfile'),
          'FROM debian:12-slim\nCOPY test.sh /tests/test.sh\nRUN echo verifier > /etc/polar-verifier-image\n',
        );
        fs.writeFileSync(
          path.join(t, 'tests', 'test.sh'),
          [
            '#!/bin/bash',
            '{ cat /app/out.txt; [ -e /app/hello.txt ] && echo hello-crossed; cat /etc/polar-verifier-image 2>/dev/null; cat /app/more/ok.txt; [ -L /app/more/link ] && echo link-crossed; } > /logs/verifier/seen',
            '[ "$(cat /app/out.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt',
          ].join('\n'),
        );
        const task = loadTasks(path.join(dir, 'suite'))[0]!;
        expect(task.harbor!.verifierMode).toBe('separate');
        const env = opts.open(suiteDeps(opts.bwrap!, dir), {
          task,
          sampleId: `env-separate-${name}-${process.pid}`,
          sessionId: 'ses_sep',
          dir: path.join(dir, 'ws'),
        });
        try {
          await env.prepare(Date.now() + 120_000);
          await env.runAgentCommand('echo 42 > /app/out.txt; mkdir /app/more; echo ok > /app/more/ok.txt; ln -s /etc/shadow /app/more/link', {
            env: baseEnvironment(),
            timeoutMs: 60_000,
            readOnly: [],
            network: 'none',
          });
          await env.collect();
          const r = await env.verification.run({
            command: 'bash /tests/test.sh',
            what: 'the verifier',
            workspace: path.join(dir, 'ws'),
            env: baseEnvironment(),
            timeoutMs: 60_000,
            // As the Harbor evaluator asks; a container's separate verifier has its image's own /tests instead.
            readOnly: [{ source: task.harbor!.testsDir, dest: '/tests' }],
            rewardDir: true,
            network: 'none',
          });
          expect(r.exitCode, r.stderr).toBe(0);
          const seen = fs.readFileSync(path.join(r.rewardDir!, 'seen'), 'utf8').trim().split('\n');
          // hello.txt stayed behind (not an artifact); the link in an artifact folder was dropped, not followed.
          expect(seen).toEqual(opts.fromImage ? ['42', 'verifier', 'ok'] : ['42', 'ok']);
          expect(fs.readFileSync(path.join(r.rewardDir!, 'reward.txt'), 'utf8').trim()).toBe('1');
          expect(env.verification.place).toMatch(opts.fromImage ? /separate verifier image/ : /only the task's artifacts/);
        } finally {
          await env.dispose(false);
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }, 300_000);
  });
}

/** A rollout's shared facts as an environment needs them: bwrap, the fixed paths, no proxy (built-in agents). */
function suiteDeps(bwrap: string, dir: string): EnvironmentDeps {
  const sandbox: SandboxSettings = { kind: 'bwrap', bwrap, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };
  return {
    sandbox,
    inside: rolloutInsidePaths(sandbox, { tasksDir: null }),
    tasksDir: null,
    proxySocket: null,
    stateDir: dir,
    modelHarness: false,
    harnessBin: null,
    nodeBin: null,
    scratch: path.join(dir, 'scratch'),
    onNotice: () => undefined,
  };
}
