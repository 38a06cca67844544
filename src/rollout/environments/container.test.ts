import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../harness/env.js';
import { bwrapProblem, DEFAULT_LIMITS, findBwrap, type SandboxSettings } from '../../sandbox/index.js';
import { loadTasks } from '../load-tasks.js';
import { rolloutInsidePaths } from '../sandboxing.js';
import { workingEngines } from '../harbor/environment.js';
import { containerEnvironment } from './container.js';
import { describeEnvironment } from './environment.cases.js';

// The suite's image is debian:12-slim, which CI makes offline (.ci/podman); no network to pull it.
const engine = workingEngines()[0] ?? null;
const bwrap = findBwrap();
const hasImage = (e: string) => {
  try {
    execFileSync(e, ['image', 'inspect', 'debian:12-slim'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skip =
  engine === null
    ? 'no container engine works here (`docker info` and `podman info` fail)'
    : bwrap === null
      ? 'bubblewrap is not installed (polar’s git on the collected workspace runs in it)'
      : !hasImage(engine)
        ? `${engine} has no debian:12-slim image`
        : bwrapProblem(bwrap);
describeEnvironment(engine ?? 'container', { skip, bwrap, open: containerEnvironment(engine ?? 'podman') });

describe.skipIf(skip !== null)(`Harbor's separate verifier in ${engine ?? 'a container'}${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('the verifier runs in tests/Dockerfile’s image and gets only the artifacts, at their paths', async () => {
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
          '{ cat /app/out.txt; [ -e /app/hello.txt ] && echo hello-crossed; cat /etc/polar-verifier-image; cat /app/more/ok.txt; [ -L /app/more/link ] && echo link-crossed; } > /logs/verifier/seen',
          '[ "$(cat /app/out.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt',
        ].join('\n'),
      );
      const task = loadTasks(path.join(dir, 'suite'))[0]!;
      expect(task.harbor!.verifierMode).toBe('separate');
      const sandbox: SandboxSettings = { kind: 'bwrap', bwrap: bwrap!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };
      const env = containerEnvironment(engine!)(
        {
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
        },
        { task, sampleId: `env-separate-${process.pid}`, sessionId: 'ses_sep', dir: path.join(dir, 'ws') },
      );
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
          readOnly: [],
          rewardDir: true,
          network: 'none',
        });
        expect(r.exitCode, r.stderr).toBe(0);
        const seen = fs.readFileSync(path.join(r.rewardDir!, 'seen'), 'utf8').trim().split('\n');
        // hello.txt stayed behind (not an artifact); the link in an artifact folder was dropped, not followed.
        expect(seen).toEqual(['42', 'verifier', 'ok']);
        expect(fs.readFileSync(path.join(r.rewardDir!, 'reward.txt'), 'utf8').trim()).toBe('1');
        expect(env.verification.place).toMatch(/separate/);
      } finally {
        await env.dispose(false);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
