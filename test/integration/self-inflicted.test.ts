import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import type { SampleRow } from '../../src/store/rollouts.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../support/reference-upstream/index.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 39, item 4: an agent's failure is its own. Under GRPO a sample that ends `error` takes no
 * part in its group, so an agent that could end its own sample `error` on purpose would learn to
 * leave a group it would score 0 in. Each task here has the agent (a script that runs its prompt
 * with bash, in a bwrap rollout) write the right answer and then break something polar relies on
 * after it: the workspace's .git (polar now diffs with its own copy of the baseline, so the work is
 * graded as it stands), more to diff than polar's cap, a file polar cannot read, or its own file-size
 * cap. None ends `error`; an honest sample of the same rollout keeps its 1.
 */
const bwrap = findBwrap();
const ANSWER = 'echo ok > answer.txt';
/** [task, what the agent does after answering, how the sample ends]: graded as usual (1), or forfeited with the reason. */
const CASES: [string, string, { reward: 1 } | { forfeit: RegExp }][] = [
  ['honest', 'true', { reward: 1 }],
  ['rm-git', 'rm -rf .git', { reward: 1 }],
  ['corrupt-head', 'echo junk > .git/HEAD', { reward: 1 }],
  ['corrupt-index', 'head -c 64 /dev/urandom > .git/index', { reward: 1 }],
  ['git-file', "rm -rf .git && echo 'gitdir: /nowhere' > .git", { reward: 1 }],
  // A clean filter that fails, required: `git add` of any file failed ("external filter 'false' failed").
  ['required-filter', "git config filter.x.clean false && git config filter.x.required true && echo '* filter=x' > .gitattributes", { reward: 1 }],
  // 1.4 GB of sparse files (each under the file-size cap) kept `git add` past its timeout.
  ['sparse', 'truncate -s 700M a.bin && truncate -s 700M b.bin', { forfeit: /total 1468006[0-9]+ bytes; polar diffs at most .*a\.bin/ }],
  ['unreadable', 'echo s > secret && chmod 000 secret', { forfeit: /cannot read.*secret/ }],
  // A repository of its own with no commit: `git add` refuses it ("does not have a commit checked out").
  ['nested-repo', 'mkdir sub && git -C sub init -q && echo x > sub/f', { forfeit: /git repositories in its workspace that polar cannot add: sub\// }],
  // Past its own file-size cap in its /tmp (a sparse write across it: SIGXFSZ at 800 MiB).
  ['own-cap', 'dd if=/dev/zero of=/tmp/big.bin bs=1M seek=799 count=2 2>/dev/null', { forfeit: /own cap: file size limit 800 MiB/ }],
];

let dir: string;
let upstream: ReferenceUpstream | undefined;
let samples: SampleRow[];
let stdout: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-self-inflicted-'));
  const agentDir = path.join(dir, 'agent');
  fs.mkdirSync(agentDir);
  const agent = path.join(agentDir, 'agent.mjs');
  fs.writeFileSync(
    agent,
    "import { spawnSync } from 'node:child_process';\nconst r = spawnSync('/bin/bash', ['-c', process.argv[2]], { stdio: 'inherit' });\nprocess.exit(r.status ?? 1);\n",
  );
  const evaluator = { type: 'command', command: 'grep -qx ok answer.txt && echo 1 || echo 0', timeout: 60 };
  const tasks = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(tasks, CASES.map(([id, then]) => JSON.stringify({ id, prompt: `${ANSWER} && ${then}`, workspace: { empty: true }, evaluator })).join('\n'));
  const db = path.join(dir, 'polar.db');
  // No model is called, and the model is named so none is asked for; the upstream must still answer
  // (issue 40: a rollout against one nobody answers at is refused at start).
  upstream = await startReferenceUpstream();
  const r = await polarCli(
    [
      'rollout',
      '--tasks',
      tasks,
      ...nodeAgentHarness(agent),
      '--sandbox-ro',
      agentDir,
      '--upstream',
      upstream.url,
      '--model',
      'm',
      '--db',
      db,
      '--out',
      path.join(dir, 'out'),
      '--sandbox',
      'bwrap',
      '--samples',
      '1',
      '--max-file-size',
      '800m',
      '--json',
    ],
    { timeout: patient(240_000), maxBuffer: 64 * 1024 * 1024 },
  );
  stdout = r.stdout;
  expect(r.stdout, r.stderr).toMatch(/^\{/);
  const store = Store.open(db, { readonly: true });
  try {
    samples = store.rollouts.samples(store.rollouts.list()[0]!.id);
  } finally {
    store.close();
  }
}, patient(300_000));
afterAll(async () => {
  await upstream?.close();
  if (dir) removeTree(dir);
});

describe.skipIf(!bwrap)(`an agent's own failure scores it 0, never error${bwrap ? '' : ' (skipped: bubblewrap is not installed)'}`, () => {
  it.each(CASES)('%s (after answering: %s)', (task, _then, expected) => {
    const s = samples.find((x) => x.taskId === task)!;
    const why = `${s.status}: ${s.errorStage ?? ''} ${s.error ?? ''} ${JSON.stringify(s.evaluator)}`;
    expect(s.status, why).not.toBe('error');
    expect(s.error, why).toBeNull();
    if ('reward' in expected) {
      // Graded on the work as it stands: the diff is taken from polar's copy of the baseline, whatever .git became.
      expect(s.reward, why).toBe(1);
      expect(s.evaluator?.forfeit, why).toBeUndefined();
      expect(s.diff, why).toContain('+++ b/answer.txt');
    } else {
      expect(s.reward, why).toBe(0);
      expect(String(s.evaluator?.forfeit), why).toMatch(expected.forfeit);
    }
  });

  it('the summary counts the forfeits and no error', () => {
    const summary = JSON.parse(stdout);
    expect(summary.outcomes.error).toBe(0);
    expect(summary.forfeited).toBe(CASES.filter(([, , e]) => 'forfeit' in e).length);
  });
});
