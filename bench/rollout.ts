/**
 * `npx tsx bench/rollout.ts [--harnesses=claude-code,codex,…] [--sections=startup,overlap,harnesses]
 * [--rounds=30] [--write]`: the rollout scheduler and the sandbox (`npm run bench:rollout`).
 *
 * 1. Stage overlap: 8 sessions, each with 2 s of setup (INIT) and 2 s of harness run (RUNNING), 2 run
 *    workers and 2 init workers. With overlap the rollout is run-bound: the first setup, then 8 runs
 *    two at a time = 2 + 8 × 2 / 2 = 10 s; without it every session costs setup + run = 8 × 4 / 2 =
 *    16 s. Scheduler overhead per session = (wall − run-bound) / 8.
 * 2. Sessions per minute per harness: the fixture tasks × 2 samples against the mock model, with the
 *    real harness CLIs, 2 at a time, in the default sandbox.
 * 3. Sandbox start-up (bench/sandbox-startup.ts): spawn to the first byte of `/bin/echo`'s output
 *    unsandboxed, in the old sandbox and in the new one, `--rounds` rounds interleaved; the added
 *    start-up per sample is the target (<= 30 ms with the bridge, issue 33). `--write` puts its section into bench/RESULTS.md.
 * Prints Markdown for bench/RESULTS.md.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findBwrap } from '../src/sandbox/index.js';
import { cgroupSupport } from '../src/sandbox/limits.js';
import { startMockServer } from '../src/mock-server/server.js';
import { mockTasksFrom } from '../src/mock-server/tasks.js';
import type { RolloutConfig } from '../src/rollout/config.js';
import { runRollout } from '../src/rollout/run-rollout.js';
import { readTaskFile, type RolloutTask } from '../src/rollout/task-file.js';
import { writeResultsSection } from './paths.js';
import { measureStartup, startupTable, startupVerdict } from './sandbox-startup.js';

const sections = (process.argv.find((a) => a.startsWith('--sections='))?.split('=')[1] ?? 'startup,overlap,harnesses').split(',');
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? 30);
const harnesses = (process.argv.find((a) => a.startsWith('--harnesses='))?.split('=')[1] ?? 'claude-code,codex,gemini-cli,pi,opencode')
  .split(',')
  .filter(Boolean);
// Not under /tmp: the bwrap sandbox gives commands a private /tmp, where the agent script would not be.
fs.mkdirSync(path.resolve(import.meta.dirname, '.tmp'), { recursive: true });
const dir = fs.mkdtempSync(path.join(path.resolve(import.meta.dirname, '.tmp'), 'rollout-'));
const sandbox = findBwrap() ? 'bwrap' : 'none';

function config(over: Partial<RolloutConfig>): RolloutConfig {
  return {
    harness: 'custom',
    upstream: { url: '', kind: 'vllm' },
    model: null,
    samples: 1,
    concurrency: 2,
    initWorkers: 2,
    postWorkers: 2,
    timeoutSec: 300,
    outDir: path.join(os.tmpdir(), `polar-bench-out-${Math.random().toString(36).slice(2)}`),
    accept: null,
    keepWorkspaces: false,
    sandbox,
    ...over,
  };
}

async function overlap(): Promise<string[]> {
  const mock = await startMockServer({ fast: true, log: false });
  const agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(
    agent,
    `await (await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) })).json();
await new Promise((r) => setTimeout(r, Number(process.argv[2]) * 1000));`,
  );
  const rows: string[] = [];
  for (const [setup, work] of [
    [2, 2],
    [0, 0],
  ] as const) {
    const tasks: RolloutTask[] = Array.from({ length: 4 }, (_, i) => ({
      id: `t${i}`,
      prompt: 'go',
      workspace: { empty: true },
      setup: setup > 0 ? [`sleep ${setup}`] : [],
      evaluator: { type: 'session-completed' },
      timeout: null,
      metadata: {},
    }));
    const started = Date.now();
    const summary = await runRollout({
      dbPath: path.join(dir, `overlap-${setup}.db`),
      tasks,
      config: config({ command: `${process.execPath} ${agent} ${work}`, upstream: { url: mock.url, kind: 'vllm' }, samples: 2 }),
    });
    const wall = (Date.now() - started) / 1000;
    const sessions = summary.outcomes.completed;
    const runBound = setup + (sessions * work) / 2;
    const sum = (sessions * (setup + work)) / 2;
    rows.push(
      `| ${setup} s | ${work} s | ${sessions} | ${wall.toFixed(2)} s | ${runBound.toFixed(1)} s | ${sum.toFixed(1)} s | ${(((wall - runBound) / sessions) * 1000).toFixed(0)} ms | ${((sessions / wall) * 60).toFixed(1)} |`,
    );
  }
  await mock.close();
  return rows;
}

async function perHarness(): Promise<string[]> {
  const file = path.resolve(import.meta.dirname, '..', 'fixtures', 'tasks', 'tasks.jsonl');
  const tasks = readTaskFile(file);
  const mock = await startMockServer({ log: false, tasks: mockTasksFrom(tasks), seed: 1 });
  const rows: string[] = [];
  for (const harness of harnesses) {
    const started = Date.now();
    const summary = await runRollout({
      dbPath: path.join(dir, `${harness}.db`),
      tasks,
      tasksFile: file,
      config: config({ harness, upstream: { url: mock.url, kind: 'vllm' }, samples: 2 }),
    });
    const wall = (Date.now() - started) / 1000;
    const ended = summary.outcomes.completed + summary.outcomes.failed + summary.outcomes.timeout + summary.outcomes.error;
    rows.push(
      `| ${harness} | ${ended} | ${summary.outcomes.completed} | ${wall.toFixed(1)} s | ${((ended / wall) * 60).toFixed(1)} | ${summary.meanReward?.toFixed(3) ?? '-'} |`,
    );
    process.stderr.write(`${harness}: ${ended} sessions in ${wall.toFixed(1)} s\n`);
  }
  await mock.close();
  return rows;
}

function cgroupFacts(): string {
  const cg = cgroupSupport();
  return cg ? `cgroup v${cg.version} (${Object.keys(cg.parents).join(', ')})` : 'no writable cgroup (rlimits only)';
}

const STARTUP_HEADING = 'Sandbox start-up per sample (issue 24)';

async function startup(): Promise<string> {
  const load = os.loadavg()[0]!.toFixed(1);
  const samples = await measureStartup(rounds);
  const cpu = os.cpus()[0]?.model.trim() ?? 'unknown CPU';
  const bwrapVersion = execFileSync('bwrap', ['--version'], { encoding: 'utf8' }).trim();
  return `## ${STARTUP_HEADING}

${new Date().toISOString().slice(0, 10)}, ${cpu}, ${os.cpus().length} cores, Linux ${os.release()}, Node ${process.version}, ${bwrapVersion}, ${cgroupFacts()}; 1-minute load average ${load} when it started (other work shared the machine).
\`npm run bench:rollout -- --sections=startup --rounds=${rounds} --write\` (bench/sandbox-startup.ts).

${startupTable(samples)}

${startupVerdict(samples)}

How to read it: each row is one way of starting \`/bin/echo x\`, and "first byte" is the time from asking for it to its
output's first byte, as a rollout pays it for every harness and evaluator command. The rows take turns round by round
(${rounds} rounds after 3 of warm-up, each round in the next permutation of their order), so they saw the same machine.
"added" is the row's percentile minus the unsandboxed one's: the sandbox's own start-up. *old* is the pre-issue-24
sandbox (\`--ro-bind / /\`, private /tmp, pid namespace); *new* is src/sandbox (openJail: private folders, the
sample's cgroup, the minimal view, user/pid/ipc/uts namespaces), timed from openJail on. *new proxy-only* is what a
harness gets: its own network namespace plus the bridge, a Perl forwarder (src/sandbox/bridge-perl.ts) that listens
on the proxy's port inside, forks its relay and becomes the command; *new proxy-only, node bridge* is the Node
forwarder polar used before (and falls back to without Perl), which listens, then starts the command, so its row
includes one Node start-up; *new none* (evaluators) and *new host* have no bridge.
"teardown" is from the first byte to the command's exit and, for the new sandbox, jail.close() (killing leftovers,
removing the cgroup and folders): paid per sample too, but after the work. The target is added <= 30 ms per sample
with the bridge (issue 33; it was <= 100 ms in issue 24).
`;
}

if (sections.includes('startup')) {
  const text = await startup();
  console.log(text);
  if (process.argv.includes('--write')) writeResultsSection(STARTUP_HEADING, text);
}
if (!sections.includes('overlap') && !sections.includes('harnesses')) {
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
const overlapRows = sections.includes('overlap') ? await overlap() : [];
const harnessRows = sections.includes('harnesses') ? await perHarness() : [];
console.log(`## Rollouts: stage overlap and sessions per minute (${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, Node ${process.version}, sandbox ${sandbox})

\`npx tsx bench/rollout.ts\`. Stage overlap: 8 sessions (4 tasks × 2), 2 init / 2 run / 2 post workers, a custom agent
that makes one model call and then works for "run" seconds; "run-bound" is the first setup plus the runs two at a time,
"sum" what the same workers take if setup and run do not overlap. Overhead is the wall time beyond run-bound, per session:
workspace, git baseline and diff, harness start, capture, evaluation, sandbox.

| setup | run | sessions | wall | run-bound | sum | overhead / session | sessions / min |
|---:|---:|---:|---:|---:|---:|---:|---:|
${overlapRows.join('\n')}

Sessions per minute per harness: the fixture tasks (fixtures/tasks) × 2 samples against the mock model, 2 sessions at a
time; each session is the real CLI starting, 2–4 model calls through the proxy, shell commands, and the evaluator.

| harness | sessions | completed | wall | sessions / min | mean reward |
|---|---:|---:|---:|---:|---:|
${harnessRows.join('\n')}
`);
fs.rmSync(dir, { recursive: true, force: true });
