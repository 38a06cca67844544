/**
 * polar's own time per sample outside the harness, on the host environment (issue 31's target:
 * <= 100 ms p50): INIT (the sample's environment, the starting state from the Dockerfile's COPY,
 * polar's baseline commit) plus POSTRUN (collect: the diff; the verifier's sandbox, its reward
 * folder made and read; the reward recorded), as each sample's `timing` stores them. The agent is
 * Harbor's `nop` and the verifier one `echo`, so what is measured is polar's work, not a task's.
 *
 *   npx tsx bench/sample-overhead.ts [--baseline DIR] [--rounds 5] [--samples 6] [--write]
 *
 * `--baseline DIR`: an earlier polar build (its bin/polar.js), run in turns with this one, round by
 * round, so both see the same machine. `--write` puts the section into bench/RESULTS.md.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { ROOT } from './paths.js';

const run = promisify(execFile);
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const BASELINE = process.argv.includes('--baseline') ? path.resolve(arg('--baseline', '')) : null;
const ROUNDS = Number(arg('--rounds', '5'));
const SAMPLES = Number(arg('--samples', '6'));
const WRITE = process.argv.includes('--write');

/** Two small Harbor tasks, as a suite's usually are: a folder of sources copied to /app, a one-line verifier. */
function makeSuite(dir: string): string {
  const suite = path.join(dir, 'suite');
  for (const name of ['fix-a', 'fix-b']) {
    const t = path.join(suite, name);
    fs.mkdirSync(path.join(t, 'environment', 'src', 'lib'), { recursive: true });
    fs.mkdirSync(path.join(t, 'tests'), { recursive: true });
    fs.writeFileSync(path.join(t, 'task.toml'), 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n');
    fs.writeFileSync(path.join(t, 'instruction.md'), `Fix ${name}.\n`);
    fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM node:20-slim\nWORKDIR /app\nCOPY src/ /app/\n');
    for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(t, 'environment', 'src', 'lib', `m${i}.js`), `module.exports = ${i};\n`.repeat(20));
    fs.writeFileSync(path.join(t, 'tests', 'test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
  }
  return suite;
}

interface Timing {
  init_ms: number;
  post_ms: number;
}

async function rollout(bin: string, suite: string, dir: string, tag: string): Promise<Timing[]> {
  const db = path.join(dir, `${tag}.db`);
  await run(
    process.execPath,
    [
      bin,
      'rollout',
      '--tasks',
      suite,
      '--harness',
      'nop',
      '--samples',
      String(SAMPLES / 2),
      '--environment',
      'host',
      '--concurrency',
      '1',
      '--init-workers',
      '1',
      '--post-workers',
      '1',
      '--db',
      db,
      '--out',
      path.join(dir, `${tag}-out`),
      '--json',
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const sqlite = new Database(db, { readonly: true });
  try {
    const rows = sqlite.prepare('SELECT status, timing FROM samples').all() as { status: string; timing: string }[];
    for (const r of rows) if (r.status !== 'completed') throw new Error(`${tag}: a sample ended ${r.status}`);
    return rows.map((r) => JSON.parse(r.timing) as Timing);
  } finally {
    sqlite.close();
  }
}

function pct(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-sample-'));
  try {
    const suite = makeSuite(dir);
    const builds: [string, string][] = [
      ...(BASELINE ? ([[`before (${path.basename(BASELINE)})`, path.join(BASELINE, 'bin', 'polar.js')]] as [string, string][]) : []),
      ['this change', path.join(ROOT, 'bin', 'polar.js')],
    ];
    const got = new Map<string, Timing[]>(builds.map(([name]) => [name, []]));
    // One warm-up each (page cache, Node's compile cache), then the rounds in alternating order.
    for (const [name, bin] of builds) await rollout(bin, suite, dir, `warm-${name.replace(/\W+/g, '-')}`);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? builds : [...builds].reverse();
      for (const [name, bin] of order) got.get(name)!.push(...(await rollout(bin, suite, dir, `r${r}-${name.replace(/\W+/g, '-')}`)));
    }
    const rows = builds.map(([name]) => {
      const t = got.get(name)!;
      const both = t.map((x) => x.init_ms + x.post_ms);
      return `| ${name} | ${t.length} | ${pct(
        t.map((x) => x.init_ms),
        50,
      )} | ${pct(
        t.map((x) => x.post_ms),
        50,
      )} | ${pct(both, 50)} | ${pct(both, 90)} |`;
    });
    const load = os.loadavg()[0]!.toFixed(1);
    const section = [
      `## Rollout overhead per sample outside the harness (${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, Node ${process.version}, host environment, bwrap)`,
      '',
      `\`npx tsx bench/sample-overhead.ts${BASELINE ? ' --baseline DIR' : ''} --rounds ${ROUNDS} --samples ${SAMPLES}\` (bench/sample-overhead.ts). Two Harbor tasks (20 files copied to /app, a verifier that writes reward 1), Harbor's \`nop\` agent, one sample at a time; the builds take turns round by round. INIT: the environment, the starting state, the baseline commit; POST: collect (the diff) and the verifier (its sandbox, reward folder, reward recorded). 1-minute load ${load} at the end.`,
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
