import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { dockerApi } from '../support/docker-api.js';
import { polarE2e } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { processesWith } from '../support/processes.js';

/**
 * Containers that start (issue 32, 3), under podman and under docker, where no docker daemon runs,
 * through podman's Docker-compatible API (`podman system service` + DOCKER_HOST). Every image is
 * FROM debian:12-slim, as .ci/podman makes it offline. Each case is skipped with its reason where
 * its engine does not work here.
 *
 * - Harbor's hello-world shape (examples/tasks/hello-world: `FROM …` and `WORKDIR /app` only) and
 *   an image with no WORKDIR at all (polar's workspace is then /app): podman 4.3 would not start
 *   either while polar passed `--workdir /app` ("workdir /app does not exist").
 * - `--sandbox-ro` paths are in the agent's container at their own paths, read-only.
 * - An image build longer than [agent].timeout_sec (build_timeout_sec larger) leaves the agent its
 *   whole budget: the build happens before it starts. One past build_timeout_sec is stopped, tried
 *   once for all the task's samples, and says what to do.
 */
const answers = (bin: string, args: string[]): boolean => {
  try {
    execFileSync(bin, args, { stdio: 'ignore', timeout: patient(30_000) });
    return true;
  } catch {
    return false;
  }
};
const docker = dockerApi();
const ENGINES: { engine: 'podman' | 'docker'; skip: string | null }[] = [
  { engine: 'podman', skip: answers('podman', ['info']) ? null : '`podman info` fails here' },
  { engine: 'docker', skip: docker.skip },
];

let dir: string;
/** The environment polar runs with for each engine (DOCKER_HOST at podman's API for docker). */
const engineEnv: Record<string, NodeJS.ProcessEnv> = { podman: {}, docker: {} };
/** Tags of images built only for these tests (a nonce in their RUN step), removed at the end. */
const built: { engine: string; repo: string }[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-ctr-start-'));
  if (docker.skip === null) engineEnv.docker = await docker.start();
}, patient(60_000));

afterAll(() => {
  for (const { engine, repo } of built) {
    const env = { ...process.env, ...engineEnv[engine] };
    try {
      const tags = execFileSync(engine, ['images', '--format', '{{.Repository}}:{{.Tag}}'], { env, encoding: 'utf8' })
        .split('\n')
        .filter((t) => t.includes(repo));
      if (tags.length > 0) execFileSync(engine, ['rmi', '-f', ...tags], { env, stdio: 'ignore' });
    } catch {
      // Best effort: a left image costs disk, not correctness.
    }
  }
  docker.stop();
  removeTree(dir);
});

interface TaskSpec {
  dockerfile: string;
  solve: string;
  /** test.sh's check: reward 1 where it succeeds. */
  check: string;
  agentTimeoutSec?: number;
  buildTimeoutSec?: number;
}

function writeTask(ds: string, id: string, t: TaskSpec): void {
  const task = path.join(ds, id);
  for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(task, d), { recursive: true });
  fs.writeFileSync(
    path.join(task, 'task.toml'),
    [
      'version = "1.0"',
      '[task]',
      `name = "polar-test/${id}"`,
      '[verifier]',
      'timeout_sec = 60.0',
      '[agent]',
      `timeout_sec = ${(t.agentTimeoutSec ?? 120).toFixed(1)}`,
      '[environment]',
      `build_timeout_sec = ${(t.buildTimeoutSec ?? 600).toFixed(1)}`,
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(task, 'instruction.md'), 'Create a file called hello.txt with "Hello, world!" as the content.\n');
  fs.writeFileSync(path.join(task, 'environment', 'Dockerfile'), t.dockerfile);
  fs.writeFileSync(path.join(task, 'solution', 'solve.sh'), `#!/bin/bash\n${t.solve}\n`);
  fs.writeFileSync(path.join(task, 'tests', 'test.sh'), `#!/bin/bash\nif ${t.check}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n`);
}

const HELLO = { solve: 'echo "Hello, world!" > hello.txt', check: '[ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]' };

interface Summary {
  outcomes: Record<string, number>;
  groups: { taskId: string; rewards: number[] }[];
}

async function rollout(engine: string, tasks: string, agent: string, extra: string[] = []): Promise<{ summary: Summary; stderr: string }> {
  const db = path.join(dir, `${engine}-${agent}-${randomBytes(4).toString('hex')}.db`);
  const r = await polarE2e(
    ['rollout', '--tasks', tasks, '--harness', agent, '--samples', '1', '--environment', engine, '--db', db, '--json', ...extra],
    engineEnv[engine],
  );
  expect(r.code, r.stderr).toBe(0);
  return { summary: JSON.parse(r.stdout) as Summary, stderr: r.stderr };
}

const rewards = (s: Summary) => Object.fromEntries(s.groups.map((g) => [g.taskId, g.rewards]));

for (const { engine, skip } of ENGINES) {
  describe.skipIf(skip !== null)(`containers that start under ${engine}${skip ? ` (skipped: ${skip})` : ''}`, () => {
    it(
      "Harbor's hello-world shape, an image without WORKDIR, and --sandbox-ro: the oracle earns 1, nop 0",
      async () => {
        const ds = path.join(dir, `${engine}-hello`);
        // Harbor's examples/tasks/hello-world/environment/Dockerfile, on the local base.
        writeTask(ds, 'hello-world', { dockerfile: 'FROM debian:12-slim\n\nWORKDIR /app\n', ...HELLO });
        writeTask(ds, 'no-workdir', { dockerfile: 'FROM debian:12-slim\n', ...HELLO });
        // A --sandbox-ro folder (a custom harness's toolchain): at its own path, and read-only.
        const tool = path.join(dir, `${engine}-tool`);
        fs.mkdirSync(tool);
        fs.writeFileSync(path.join(tool, 'greeting.txt'), 'Hello, world!\n');
        writeTask(ds, 'sandbox-ro', {
          dockerfile: 'FROM debian:12-slim\nWORKDIR /app\n',
          solve: `cat '${tool}/greeting.txt' > hello.txt; if touch '${tool}/written' 2>/dev/null; then echo yes > wrote.txt; fi`,
          check: `${HELLO.check} && [ ! -e /app/wrote.txt ]`,
        });
        const oracle = await rollout(engine, ds, 'oracle', ['--sandbox-ro', tool]);
        expect(rewards(oracle.summary), oracle.stderr).toEqual({ 'hello-world': [1], 'no-workdir': [1], 'sandbox-ro': [1] });
        expect(fs.existsSync(path.join(tool, 'written'))).toBe(false);
        const nop = await rollout(engine, ds, 'nop', ['--sandbox-ro', tool]);
        expect(rewards(nop.summary), nop.stderr).toEqual({ 'hello-world': [0], 'no-workdir': [0], 'sandbox-ro': [0] });
        expect(nop.summary.outcomes.completed).toBe(3);
      },
      patient(300_000),
    );

    it(
      "an image build longer than the agent's timeout leaves the agent its whole budget",
      async () => {
        const ds = path.join(dir, `${engine}-slow`);
        // A nonce in the RUN step: neither a cached image nor a cached layer skips the build.
        const nonce = randomBytes(8).toString('hex');
        writeTask(ds, 'slow-build', {
          dockerfile: `FROM debian:12-slim\nRUN sleep 24 && echo ${nonce} > /nonce\nWORKDIR /app\n`,
          agentTimeoutSec: 20,
          buildTimeoutSec: 300,
          ...HELLO,
        });
        built.push({ engine, repo: 'polar-harbor/polar-test-slow-build' });
        const oracle = await rollout(engine, ds, 'oracle');
        expect(rewards(oracle.summary), oracle.stderr).toEqual({ 'slow-build': [1] });
        expect(oracle.summary.outcomes.completed).toBe(1);
      },
      patient(300_000),
    );

    it(
      'a build past build_timeout_sec ends the sample with what to do, and stops what the build ran',
      async () => {
        const ds = path.join(dir, `${engine}-too-slow`);
        const nonce = randomBytes(8).toString('hex');
        writeTask(ds, 'too-slow', { dockerfile: `FROM debian:12-slim\nRUN sleep 30 && echo ${nonce}\n`, buildTimeoutSec: 3, ...HELLO });
        built.push({ engine, repo: 'polar-harbor/polar-test-too-slow' });
        const db = path.join(dir, `${engine}-too-slow.db`);
        const r = await polarE2e(
          ['rollout', '--tasks', ds, '--harness', 'oracle', '--samples', '2', '--concurrency', '1', '--environment', engine, '--db', db, '--json'],
          engineEnv[engine],
        );
        const summary = JSON.parse(r.stdout) as Summary & { rolloutId: string };
        expect(summary.outcomes.error, r.stderr).toBe(2);
        // One attempt for both samples, each ended with the reason and the way out.
        expect(r.stderr.match(/building polar-harbor\/polar-test-too-slow/g), r.stderr).toHaveLength(1);
        const store = Store.open(db, { readonly: true });
        const errors = store.rollouts.samples(summary.rolloutId).map((s) => s.error);
        store.close();
        expect(errors).toHaveLength(2);
        for (const e of errors) expect(e).toMatch(/did not finish within build_timeout_sec = 3 s \(task\.toml \[environment\]\): raise it there/);
        // podman: the RUN step's `sleep 30` does not outlive the build (runc runs it in a session of
        // its own: the client killed, or sent SIGTERM, left it running; polar kills the client's
        // process tree). Waited for, with a generous safety net. docker builds in its daemon, which
        // decides (podman's Docker API runs the build to its end).
        if (engine !== 'podman') return;
        const running = () => processesWith(nonce).length > 0;
        for (let i = 0; i < 600 && running(); i++) await new Promise((res) => setTimeout(res, 100));
        expect(running()).toBe(false);
      },
      patient(300_000),
    );
  });
}
