import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The fleet check's tasks, written into the coordinator's folder (which no host can see): `dir`
 * workspaces, a local git repository pinned at a commit per task, and Harbor task folders. Every
 * task's reward is a number its workspace holds (weight.txt), paid only when the agent finished its
 * calls (done.txt): a right reward proves the workspace content reached the host and the agent ran
 * to its end. The agent itself is "installed" on every host (the code folder), as a harness is.
 */

/** The agent: `calls=N sleep:S` model calls through polar's proxy, then done.txt; exit 3 on a failed call. */
export const AGENT = `
import fs from 'node:fs';
const prompt = process.argv.slice(2).join(' ');
const calls = Number(/calls=(\\d+)/.exec(prompt)?.[1] ?? 1);
const pause = Number(/sleep:([\\d.]+)/.exec(prompt)?.[1] ?? 0) * 1000;
// One growing conversation (append-only, as a harness keeps it): each reply and its tool results go back.
const messages = [{ role: 'user', content: prompt }];
for (let i = 0; i < calls; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({ model: 'any', messages }),
  });
  if (!res.ok) process.exit(3);
  const reply = (await res.json()).choices[0].message;
  messages.push({ role: 'assistant', content: reply.content ?? '', ...(reply.tool_calls?.length ? { tool_calls: reply.tool_calls } : {}) });
  for (const call of reply.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: 'ok' });
  if (!reply.tool_calls?.length) messages.push({ role: 'user', content: 'go on' });
  if (i === 0 && pause > 0) await new Promise((r) => setTimeout(r, pause));
}
fs.writeFileSync('done.txt', 'done\\n');
`;

export interface FleetTasks {
  /** The JSONL task file (dir and git workspaces). */
  jsonl: string;
  /** The folder of Harbor tasks, or null when there are none. */
  harbor: string | null;
  /** Each task's expected reward, by task id. */
  rewards: Record<string, number>;
  /** Each task's kind, by task id. */
  kinds: Record<string, 'dir' | 'git' | 'harbor'>;
  /** The agent script, on the hosts' shared code folder. */
  agent: string;
}

export interface TaskPlan {
  /** Tasks in the JSONL file (dir and git alternate, starting with dir). */
  jsonl: number;
  harbor: number;
  /** Seconds the agent waits after its first call: keeps samples running while faults hit. */
  sleepS: number;
  calls: number;
}

/** How many tasks make `total` samples at `group` samples a task, `harbor` of them Harbor tasks (at least one of each JSONL kind). */
export function planTasks(total: number, group: number, harbor: number): { jsonl: number; harbor: number } {
  const tasks = Math.max(harbor + 2, Math.ceil(total / group));
  return { jsonl: tasks - harbor, harbor };
}

const WEIGHTS = [1, 0.5, 0.25, 0.75];

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=fleet', '-c', 'user.email=fleet@localhost', '-c', 'commit.gpgsign=false', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  }).trim();

export function writeTasks(coordDir: string, codeDir: string, plan: TaskPlan): FleetTasks {
  const agent = path.join(codeDir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
  const rewards: Record<string, number> = {};
  const kinds: FleetTasks['kinds'] = {};
  const prompt = (id: string) => `calls=${plan.calls} sleep:${plan.sleepS} fleet task ${id}`;
  const evaluator = { type: 'command', command: 'test -f done.txt && cat weight.txt || echo 0', timeout: 60 };
  // One repository, a commit per git task, each with its own weight: the right reward also proves the pinned commit was checked out.
  const repo = path.join(coordDir, 'repos', 'weights.git-src');
  fs.mkdirSync(repo, { recursive: true });
  git(repo, 'init', '-q', '-b', 'main');
  const lines: string[] = [];
  for (let i = 0; i < plan.jsonl; i++) {
    const weight = WEIGHTS[i % WEIGHTS.length]!;
    if (i % 2 === 0) {
      const id = `dir-${i}`;
      const dir = path.join(coordDir, 'repos', id);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'weight.txt'), `${weight}\n`);
      lines.push(JSON.stringify({ id, prompt: prompt(id), workspace: { dir }, evaluator, timeout: 300 }));
      rewards[id] = weight;
      kinds[id] = 'dir';
    } else {
      const id = `git-${i}`;
      fs.writeFileSync(path.join(repo, 'weight.txt'), `${weight}\n`);
      git(repo, 'add', 'weight.txt');
      git(repo, 'commit', '-q', '--allow-empty', '-m', id);
      const commit = git(repo, 'rev-parse', 'HEAD');
      lines.push(JSON.stringify({ id, prompt: prompt(id), workspace: { git: repo, commit }, evaluator, timeout: 300 }));
      rewards[id] = weight;
      kinds[id] = 'git';
    }
  }
  // A later commit changes the weight again: a worker that took the branch head instead of the pin gets a wrong reward.
  fs.writeFileSync(path.join(repo, 'weight.txt'), '0.125\n');
  git(repo, 'commit', '-q', '-am', 'head');
  const jsonl = path.join(coordDir, 'tasks.jsonl');
  fs.writeFileSync(jsonl, `${lines.join('\n')}\n`);
  const harbor = plan.harbor > 0 ? path.join(coordDir, 'harbor') : null;
  for (let i = 0; i < plan.harbor; i++) {
    const id = `harbor-${i}`;
    const weight = WEIGHTS[(i + 1) % WEIGHTS.length]!;
    writeHarborTask(path.join(harbor!, id), prompt(id), weight);
    rewards[id] = weight;
    kinds[id] = 'harbor';
  }
  return { jsonl, harbor, rewards, kinds, agent };
}

/** A Harbor task folder: weight.txt COPY'd to /app, a verifier that pays it when /app/done.txt exists. */
function writeHarborTask(dir: string, instruction: string, weight: number): void {
  const file = (rel: string, text: string, mode = 0o644) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text, { mode });
  };
  file('instruction.md', `${instruction}\n`);
  file('task.toml', 'version = "1.0"\n\n[metadata]\ncategory = "fleet-check"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 300.0\n');
  file('environment/Dockerfile', 'FROM debian:12-slim\nWORKDIR /app\nCOPY weight.txt ./weight.txt\n');
  file('environment/weight.txt', `${weight}\n`);
  file('solution/solve.sh', '#!/bin/bash\necho done > /app/done.txt\n', 0o755);
  file(
    'tests/test.sh',
    '#!/bin/bash\nmkdir -p /logs/verifier\nif [ -f /app/done.txt ]; then cat /app/weight.txt > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
    0o755,
  );
}
