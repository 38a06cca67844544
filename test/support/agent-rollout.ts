import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nodeAgentHarness } from './polar-cli.js';
import { startReferenceUpstream, type ReferenceUpstream } from './reference-upstream/index.js';
import { ROLLOUT_AGENT } from './rollout-agent.js';
import { removeTree } from './remove-tree.js';

/**
 * `polar rollout` of a small Node agent (the custom harness) as the rollout tests run it: the task
 * file, the command line, and the bench most of them share (a reference upstream, a folder, and
 * ROLLOUT_AGENT in it).
 */

/**
 * Tasks as a JSONL file, one task a line, each in an empty workspace and rewarded with the last line
 * of the answer.txt the agent wrote (none written: no reward) unless the task says otherwise.
 */
export function writeRolloutTasks(file: string, tasks: Record<string, unknown>[]): string {
  fs.writeFileSync(
    file,
    tasks
      .map((t) => JSON.stringify({ workspace: { empty: true }, evaluator: { type: 'command', command: 'cat answer.txt 2>/dev/null | tail -1' }, ...t }))
      .join('\n'),
  );
  return file;
}

/**
 * A command evaluator that knows which evaluation it is: `$n` is 0 for the first to run, 1 for the
 * next (`counter`, a file, keeps the count; with --post-workers 1 they run one at a time), then
 * `then` runs and prints the reward.
 */
export function countedEvaluator(counter: string, then: string): { type: 'command'; command: string } {
  return { type: 'command', command: `n=$(cat ${counter} 2>/dev/null || echo 0); echo $((n+1)) > ${counter}; ${then}` };
}

export interface AgentRollout {
  tasks: string;
  /** The Node script run as the agent (the prompt its one argument). */
  agent: string;
  /** The inference server's base URL. */
  upstream: string;
  db: string;
  /** The test's folder: the rollout's --out is `out-<db file name>` in it, one per database. */
  dir: string;
}

/** `polar rollout` of a Node agent without a sandbox (these agents' prompts name no path), then `extra`. */
export function agentRolloutArgs(r: AgentRollout, extra: string[] = []): string[] {
  return [
    'rollout',
    '--tasks',
    r.tasks,
    ...nodeAgentHarness(r.agent),
    '--upstream',
    r.upstream,
    '--db',
    r.db,
    '--sandbox',
    'none',
    '--out',
    path.join(r.dir, `out-${path.basename(r.db)}`),
    ...extra,
  ];
}

export interface RolloutBench {
  upstream: ReferenceUpstream;
  /** The test's temporary folder. */
  dir: string;
  /** ROLLOUT_AGENT's script, in dir. */
  agent: string;
  /** writeRolloutTasks to `name` in dir. */
  taskFile(name: string, tasks: Record<string, unknown>[]): string;
  /** agentRolloutArgs for ROLLOUT_AGENT against this upstream, or the one at `url`. */
  args(tasks: string, db: string, extra?: string[], url?: string): string[];
  /** Closes the upstream and removes dir. */
  close(): Promise<void>;
}

/** A reference upstream and a new temporary folder named `prefix…` holding ROLLOUT_AGENT. */
export async function startRolloutBench(prefix: string): Promise<RolloutBench> {
  const upstream = await startReferenceUpstream();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, ROLLOUT_AGENT);
  return {
    upstream,
    dir,
    agent,
    taskFile: (name, tasks) => writeRolloutTasks(path.join(dir, name), tasks),
    args: (tasks, db, extra = [], url = upstream.url) => agentRolloutArgs({ tasks, agent, upstream: url, db, dir }, extra),
    close: async () => {
      await upstream.close();
      removeTree(dir);
    },
  };
}
