import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../sandbox/index.js';
import { buildImage } from './engine-build.js';
import { engineProvider } from './engine-cli.js';
import { removeTree } from '../../../test/support/remove-tree.js';
import { waitUntil } from '../../../test/support/wait.js';

/**
 * The image build, against a stand-in engine (a `podman` script first on PATH that logs its argv):
 * one attempt per image per process, and build_timeout_sec enforced. The real engines run it in
 * test/e2e/harbor-container-start.test.ts.
 */
let dir: string;
let log: string;
let savedPath: string | undefined;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-build-'));
  log = path.join(dir, 'calls.log');
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  // `image inspect` never finds the image; `build` does what the context's BEHAVIOUR file says.
  fs.writeFileSync(
    path.join(bin, 'podman'),
    [
      '#!/bin/sh',
      `echo "$*" >> '${log}'`,
      'case "$1" in',
      '  image) exit 1;;',
      '  run) echo "Error: the engine refuses this" >&2; exit 126;;',
      '  build) ctx=$(eval echo \\${$#}); case "$(cat "$ctx/BEHAVIOUR")" in',
      '    fail) echo "STEP 2/2: RUN false" >&2; echo "Error: building at STEP \\"RUN false\\": exit status 1" >&2; exit 1;;',
      // As runc starts a RUN step: in a session of its own, below the client.
      '    slow) setsid sleep 301 & exec sleep 30;;',
      '    *) exit 0;; esac;;',
      'esac',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  savedPath = process.env.PATH;
  process.env.PATH = `${bin}:${process.env.PATH}`;
});
afterAll(() => {
  process.env.PATH = savedPath;
  removeTree(dir);
});

function context(name: string, behaviour: string): string {
  const c = path.join(dir, name);
  fs.mkdirSync(c, { recursive: true });
  fs.writeFileSync(path.join(c, 'Dockerfile'), `FROM debian:12-slim\n# ${name}\n`);
  fs.writeFileSync(path.join(c, 'BEHAVIOUR'), behaviour);
  return c;
}

const builds = (c: string) =>
  fs
    .readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('build ') && l.endsWith(` ${c}`)).length;

describe('the image build', () => {
  it('is attempted once per image per process: a failure is every later sample answer, with the engine reason', async () => {
    const c = context('broken', 'fail');
    const notices: string[] = [];
    // Three samples of the task, one after another (the old code built again after each failure).
    for (let i = 0; i < 3; i++) {
      await expect(buildImage('podman', { kind: 'build', name: 'org/broken', context: c, timeoutSec: 60 }, (l) => notices.push(l))).rejects.toThrow(
        /podman build of .*broken failed \(exit 1\): Error: building at STEP "RUN false"/,
      );
    }
    expect(builds(c)).toBe(1);
    expect(notices.filter((n) => n.startsWith('building '))).toHaveLength(1);
  });

  it('is cut off at build_timeout_sec with what to do, and not retried', async () => {
    const c = context('slow', 'slow');
    const first = buildImage('podman', { kind: 'build', name: 'org/slow', context: c, timeoutSec: 0.5 }, () => {});
    await expect(first).rejects.toThrow(
      /did not finish within build_timeout_sec = 0\.5 s \(task\.toml \[environment\]\): raise it there, or build the image once/,
    );
    await expect(buildImage('podman', { kind: 'build', name: 'org/slow', context: c, timeoutSec: 0.5 }, () => {})).rejects.toThrow(/build_timeout_sec/);
    expect(builds(c)).toBe(1);
    // What the build started in a session of its own is killed with it (waited for, generous net).
    const running = () =>
      fs.readdirSync('/proc').some((p) => {
        try {
          return /^\d+$/.test(p) && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8') === 'sleep\0' + '301\0';
        } catch {
          return false;
        }
      });
    // (its natural end is 301 s away: far past this net, so a sleep that was not killed fails here)
    await waitUntil("the build's sleep to be killed", () => !running(), { timeoutMs: 30_000 });
  });

  it("builds a context's other Dockerfile (a compose service's `dockerfile`) as its own image", async () => {
    const c = context('named', 'ok');
    fs.writeFileSync(path.join(c, 'Dockerfile.api'), 'FROM debian:12-slim\n');
    const plain = await buildImage('podman', { kind: 'build', name: 'org/named', context: c, timeoutSec: 60 }, () => {});
    const named = await buildImage('podman', { kind: 'build', name: 'org/named', context: c, dockerfile: 'Dockerfile.api', timeoutSec: 60 }, () => {});
    expect(named).toMatch(/^polar-harbor\/org-named:[0-9a-f]{16}$/);
    expect(named).not.toBe(plain);
    expect(fs.readFileSync(log, 'utf8')).toContain(`build -t ${named} -f ${path.join(c, 'Dockerfile.api')} ${c}`);
  });

  it('is shared by the samples that wait on it, and reused once built', async () => {
    const c = context('fine', 'ok');
    const tags = await Promise.all([1, 2, 3].map(() => buildImage('podman', { kind: 'build', name: 'org/fine', context: c, timeoutSec: 60 }, () => {})));
    expect(new Set(tags).size).toBe(1);
    expect(tags[0]).toMatch(/^polar-harbor\/org-fine:[0-9a-f]{16}$/);
    await buildImage('podman', { kind: 'build', name: 'org/fine', context: c, timeoutSec: 60 }, () => {});
    expect(builds(c)).toBe(1);
  });
});

describe('a container that does not start', () => {
  it("says the engine's reason, the command polar ran, and how to tell an image that cannot start from a flag of polar's; nothing is left behind", async () => {
    const spec = {
      id: 'rol_x-t-0',
      image: 'polar-harbor/t:1',
      workdir: '/app',
      network: { kind: 'none' as const },
      mounts: [],
      hostname: 'polar-sandbox',
      limits: { ...DEFAULT_LIMITS, maxMemoryBytes: 1024 ** 3 },
      cpus: null,
    };
    const err = await engineProvider('podman')
      .start(spec)
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(err?.message).toMatch(/^podman could not start the sample's container from polar-harbor\/t:1: Error: the engine refuses this\./);
    expect(err?.message).toContain('polar ran: podman run -d --rm --init --name polar-rol_x-t-0');
    expect(err?.message).toContain('Try `podman run --rm polar-harbor/t:1 true`: if that fails too');
    expect(err?.message).toMatch(/--max-memory 0 and --max-procs 0 drop polar's caps/);
    // No forced --workdir (podman 4.3 refuses one the image lacks), and the half-made container is removed.
    expect(err?.message).not.toContain('--workdir');
    expect(fs.readFileSync(log, 'utf8')).toContain('rm -f polar-rol_x-t-0');
  });
});
