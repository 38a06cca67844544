import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import { applyDiff, captureDiff, prepareWorkspace, type OpenSandbox } from '../../src/rollout/workspace.js';
import { DEFAULT_LIMITS, findBwrap, openJail } from '../../src/sandbox/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 31: polar's `git apply` of the agent's diff (the `tests` evaluator's fresh copy) ran on the
 * host with the operator's git configuration, so a filter driver defined there and named by the task
 * repo's .gitattributes (or by the operator's own attributes file) ran on agent-written content. Each
 * place git reads configuration from the caller's environment defines `filter.evil` here as a script
 * that leaves a marker; preparing, capturing and applying a diff must run none of them.
 */
let dir: string;
let marker: string;
let evil: string;
const bwrap = findBwrap();

const task = (workspace: RolloutTask['workspace']): RolloutTask => ({
  id: 't',
  prompt: 'p',
  workspace,
  setup: [],
  evaluator: { type: 'command', command: 'true', timeout: 60 },
  timeout: null,
  metadata: {},
});

const filterConfig = () => `[filter "evil"]\n\tclean = ${evil} clean\n\tsmudge = ${evil} smudge\n[diff "evil"]\n\ttextconv = ${evil} textconv\n`;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-agent-diff-'));
  marker = path.join(dir, 'ran');
  evil = path.join(dir, 'evil.sh');
  fs.writeFileSync(evil, `#!/bin/sh\necho "$1" >> ${marker}\ncat\n`, { mode: 0o755 });
});
afterAll(() => removeTree(dir));

/** The caller's environment with git's configuration pointed at the filter, one way per case. */
const CASES: [string, (home: string) => Record<string, string>][] = [
  [
    '~/.gitconfig (HOME)',
    (home) => {
      fs.writeFileSync(path.join(home, '.gitconfig'), filterConfig());
      return { HOME: home };
    },
  ],
  [
    'GIT_CONFIG_GLOBAL',
    (home) => {
      fs.writeFileSync(path.join(home, 'global'), filterConfig());
      return { GIT_CONFIG_GLOBAL: path.join(home, 'global') };
    },
  ],
  [
    'GIT_CONFIG_SYSTEM',
    (home) => {
      fs.writeFileSync(path.join(home, 'system'), filterConfig());
      return { GIT_CONFIG_SYSTEM: path.join(home, 'system') };
    },
  ],
  [
    'XDG config and attributes (no .gitattributes in the repo needed)',
    (home) => {
      fs.mkdirSync(path.join(home, 'xdg', 'git'), { recursive: true });
      fs.writeFileSync(path.join(home, 'xdg', 'git', 'config'), filterConfig());
      fs.writeFileSync(path.join(home, 'xdg', 'git', 'attributes'), '* filter=evil diff=evil\n');
      return { XDG_CONFIG_HOME: path.join(home, 'xdg') };
    },
  ],
  ['GIT_CONFIG_PARAMETERS', () => ({ GIT_CONFIG_PARAMETERS: `'filter.evil.clean'='${evil} clean' 'filter.evil.smudge'='${evil} smudge'` })],
];

/** What the marker says each step ran ('' when nothing), and the applied file. */
async function agentDiff(name: string, env: Record<string, string>, sandbox?: OpenSandbox): Promise<{ ran: Record<string, string>; applied: string }> {
  const ran: Record<string, string> = {};
  const step = (what: string) => {
    ran[what] = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : '';
    fs.rmSync(marker, { force: true });
  };
  fs.rmSync(marker, { force: true });
  const src = path.join(dir, `${name}-task`);
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, 'a.txt'), 'bug\n');
  // The task repo names the filter for every file (as a benchmark repo can, with LFS say).
  fs.writeFileSync(path.join(src, '.gitattributes'), '* filter=evil diff=evil\n');
  const t = task({ dir: src });
  const deadline = () => Date.now() + patient(60_000);
  const agent = await prepareWorkspace(t, path.join(dir, `${name}-agent`), deadline(), env, undefined, sandbox);
  step('prepare');
  fs.writeFileSync(path.join(agent.dir, 'a.txt'), 'fixed by the agent\n');
  const diff = await captureDiff(agent, env, sandbox);
  step('capture');
  expect(diff).toContain('+fixed by the agent');
  const fresh = await prepareWorkspace(t, path.join(dir, `${name}-fresh`), deadline(), env, undefined, sandbox);
  step('fresh copy');
  await applyDiff(fresh, diff, env, sandbox);
  step('apply');
  return { ran, applied: fs.readFileSync(path.join(fresh.dir, 'a.txt'), 'utf8') };
}

const NOTHING = { prepare: '', capture: '', 'fresh copy': '', apply: '' };

describe("polar's git on the agent's content reads no configuration of the caller's", () => {
  it.each(CASES)('a filter in %s does not run when the diff is made and applied', async (label, setup) => {
    const name = label.replace(/\W+/g, '-');
    const home = path.join(dir, `${name}-home`);
    fs.mkdirSync(home);
    const env = { ...baseEnvironment(), ...setup(home) };
    expect(await agentDiff(name, env)).toEqual({ ran: NOTHING, applied: 'fixed by the agent\n' });
  });

  it.skipIf(!bwrap)('applies the diff inside the sandbox when given one', async () => {
    const sandbox: OpenSandbox = (cwd) =>
      openJail({ kind: 'bwrap', bwrap: bwrap!, network: 'host', limits: DEFAULT_LIMITS, extraReadOnly: [] }, { cwd, network: 'none' });
    const home = path.join(dir, 'sandboxed-home');
    fs.mkdirSync(home);
    fs.writeFileSync(path.join(home, '.gitconfig'), filterConfig());
    expect(await agentDiff('sandboxed', { ...baseEnvironment(), HOME: home }, sandbox)).toEqual({ ran: NOTHING, applied: 'fixed by the agent\n' });
  });
});
