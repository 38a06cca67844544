/**
 * polar's own time per sample outside the harness, on the host environment (issue 31's target:
 * <= 100 ms p50): INIT (the starting state from the Dockerfile's COPY, polar's baseline commit) plus
 * POSTRUN (collect: the diff; the verifier: its sandbox, its reward folder made and read), for a
 * Harbor task whose verifier is one `echo`, so what is measured is polar's work, not a task's.
 *
 *   npx tsx bench/sample-overhead.ts [--baseline DIR] [--rounds 30] [--write]
 *
 * The steps are called directly, one sample at a time in one warm process, as a rollout's stages
 * call them (in a rollout the stages of different samples overlap, and their timings would count
 * each other's CPU). This build: the host SampleEnvironment (prepare, collect, verification.run).
 * `--baseline DIR`: an earlier build's dist/ (before issue 31: prepareWorkspace, captureDiff and
 * runVerifier, the same work), the two in turns round by round so both see the same machine.
 * `--write` puts the section into bench/RESULTS.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './paths.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const BASELINE = process.argv.includes('--baseline') ? path.resolve(arg('--baseline', '')) : null;
const ROUNDS = Number(arg('--rounds', '30'));
const WRITE = process.argv.includes('--write');

/** A small Harbor task, as a suite's usually are: a folder of sources copied to /app, a one-line verifier. */
function makeSuite(dir: string): string {
  const t = path.join(dir, 'suite', 'fix-a');
  fs.mkdirSync(path.join(t, 'environment', 'src', 'lib'), { recursive: true });
  fs.mkdirSync(path.join(t, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(t, 'task.toml'), 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n');
  fs.writeFileSync(path.join(t, 'instruction.md'), 'Fix it.\n');
  fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM node:20-slim\nWORKDIR /app\nCOPY src/ /app/\n');
  for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(t, 'environment', 'src', 'lib', `m${i}.js`), `module.exports = ${i};\n`.repeat(20));
  fs.writeFileSync(path.join(t, 'tests', 'test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
  return path.join(dir, 'suite');
}

interface Timing {
  init: number;
  post: number;
}

type Sample = (n: number) => Promise<Timing>;

const imp = (build: string, rel: string) => import(pathToFileURL(path.join(build, 'dist', rel)).href);

/** One sample's INIT and POST through a build's own modules. */
async function sampler(build: string, suite: string, dir: string, name: string): Promise<Sample> {
  const { loadTasks } = await imp(build, 'rollout/load-tasks.js');
  const sandboxIndex = await imp(build, 'sandbox/index.js');
  const sandboxing = await imp(build, 'rollout/sandboxing.js');
  const { baseEnvironment } = await imp(build, 'harness/env.js');
  const task = loadTasks(suite)[0];
  const settings = { kind: 'bwrap', bwrap: sandboxIndex.findBwrap(), network: 'proxy-only', limits: sandboxIndex.DEFAULT_LIMITS, extraReadOnly: [] };
  const inside = sandboxing.rolloutInsidePaths(settings, { tasksDir: null });
  const ws = (n: number) => path.join(dir, name, `ws-${n}`);
  const verifier = { readOnly: [{ source: task.harbor.testsDir, dest: '/tests' }] };
  if (fs.existsSync(path.join(build, 'dist', 'rollout', 'environments', 'host.js'))) {
    const { hostEnvironment } = await imp(build, 'rollout/environments/host.js');
    const deps = {
      sandbox: settings,
      inside,
      tasksDir: null,
      proxySocket: null,
      stateDir: dir,
      modelHarness: false,
      harnessBin: null,
      nodeBin: null,
      scratch: path.join(dir, name, 'scratch'),
      onNotice: () => undefined,
    };
    return async (n) => {
      const env = hostEnvironment(deps, { task, sampleId: `s${n}`, sessionId: `ses_${n}`, dir: ws(n) });
      const a = performance.now();
      await env.prepare(Date.now() + 60_000);
      const b = performance.now();
      await env.collect();
      const run = await env.verification.run({
        command: 'bash /tests/test.sh',
        what: 'the verifier',
        workspace: ws(n),
        env: baseEnvironment(),
        timeoutMs: 60_000,
        ...verifier,
        rewardDir: true,
        network: 'none',
      });
      fs.readFileSync(path.join(run.rewardDir, 'reward.txt'), 'utf8');
      fs.rmSync(run.rewardDir, { recursive: true, force: true });
      const c = performance.now();
      await env.dispose(false);
      return { init: b - a, post: c - b };
    };
  }
  // Before issue 31: the same steps as stages.ts and evaluate.ts called them.
  const workspace = await imp(build, 'rollout/workspace.js');
  const { runVerifier } = await imp(build, 'rollout/harbor/trial.js');
  const git = sandboxing.evaluatorSandbox(settings, null, inside?.workspace ?? null);
  const setup = sandboxing.setupSandbox(settings, task, inside?.workspace ?? null);
  return async (n) => {
    const a = performance.now();
    const prepared = await workspace.prepareWorkspace(task, ws(n), Date.now() + 60_000, baseEnvironment(), setup, git);
    const b = performance.now();
    await workspace.captureDiff(prepared, baseEnvironment(), git);
    await runVerifier(task.harbor, ws(n), { settings, env: baseEnvironment(), secrets: [] }, 'none');
    const c = performance.now();
    await workspace.removeWorkspace(ws(n));
    return { init: b - a, post: c - b };
  };
}

function pct(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!);
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-sample-'));
  try {
    const suite = makeSuite(dir);
    const builds: [string, string][] = [
      ...(BASELINE ? ([[`before (${path.basename(BASELINE)})`, BASELINE]] as [string, string][]) : []),
      ['this change', ROOT],
    ];
    const samplers = await Promise.all(builds.map(([name, build], i) => sampler(build, suite, dir, `b${i}`).then((s) => [name, s] as const)));
    const got = new Map<string, Timing[]>(builds.map(([name]) => [name, []]));
    // Three warm-up samples each (page cache, the sandbox's host view, Node's compile cache).
    for (const [, s] of samplers) for (let w = 0; w < 3; w++) await s(1000 + w);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? samplers : [...samplers].reverse();
      for (const [name, s] of order) got.get(name)!.push(await s(r));
    }
    const rows = builds.map(([name]) => {
      const t = got.get(name)!;
      const both = t.map((x) => x.init + x.post);
      return `| ${name} | ${t.length} | ${pct(
        t.map((x) => x.init),
        50,
      )} | ${pct(
        t.map((x) => x.post),
        50,
      )} | ${pct(both, 50)} | ${pct(both, 90)} |`;
    });
    const load = os.loadavg()[0]!.toFixed(1);
    const section = [
      `## Rollout overhead per sample outside the harness (${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, Node ${process.version}, host environment, bwrap)`,
      '',
      `\`npx tsx bench/sample-overhead.ts${BASELINE ? ' --baseline DIR' : ''} --rounds ${ROUNDS}\` (bench/sample-overhead.ts). One Harbor task (20 files copied to /app, a verifier that writes reward 1), the stages' steps called one sample at a time in one warm process, the builds in turns round by round. INIT: the starting state and polar's baseline commit (in the sandbox); POST: collect (the diff, in the sandbox) and the verifier (its own sandbox, /logs/verifier made empty and read). Target: INIT+POST p50 <= 100 ms. 1-minute load ${load} at the end.`,
      '',
      '| build | samples | INIT p50 ms | POST p50 ms | INIT+POST p50 ms | INIT+POST p90 ms |',
      '|---|---:|---:|---:|---:|---:|',
      ...rows,
      '',
    ].join('\n');
    process.stdout.write(`${section}\n`);
    if (WRITE) {
      const file = path.join(ROOT, 'bench', 'RESULTS.md');
      const text = fs.readFileSync(file, 'utf8');
      const start = text.indexOf('## Rollout overhead per sample outside the harness');
      const next = start < 0 ? -1 : text.indexOf('\n## ', start + 1);
      const out = start < 0 ? `${text.trimEnd()}\n\n${section}` : `${text.slice(0, start)}${section}${next < 0 ? '' : text.slice(next + 1)}`;
      fs.writeFileSync(file, out);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
