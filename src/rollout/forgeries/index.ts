import type { RolloutTask } from '../task-file.js';
import { editTests, rewardFile } from './direct.js';
import { gitHistory, readSolution } from './leaks.js';
import { exitOnLoad, killChecker, selfError, stdoutSteal, verifyDaemon } from './modules.js';
import { conftest, fakeShell, pathHijack, pth, shadowModule, siteCustomize } from './system.js';
import { npmScripts, pytestConfig, pytestPlugin } from './runners.js';
import { rewardBeside, rewardHuge } from './shapes.js';
import { forkBomb, gitCorrupt, gitFile, gitFilter, gitRemoved, hugeFile, memoryHog } from './escapes.js';
import type { Forgery, ForgeryPlace } from './types.js';

export type { Forgery, ForgeryPlace } from './types.js';

/**
 * The known ways to a reward without the work, each a bash script the built-in agent
 * `forge:<name>` runs in the agent's place. `polar tasks check` tries every one that applies to a
 * task; a verifier that rewards any of them is hackable, and one whose sample ends `error`
 * (escapes.ts) lets the agent leave its GRPO group. The red-team suite runs the same scripts.
 */
export const FORGERIES: Readonly<Record<string, Forgery>> = Object.fromEntries(
  [
    rewardFile,
    killChecker,
    exitOnLoad,
    stdoutSteal,
    editTests,
    fakeShell,
    verifyDaemon,
    selfError,
    gitHistory,
    readSolution,
    pathHijack,
    siteCustomize,
    conftest,
    pth,
    shadowModule,
    pytestConfig,
    pytestPlugin,
    npmScripts,
    rewardBeside,
    rewardHuge,
    gitRemoved,
    gitCorrupt,
    gitFile,
    gitFilter,
    forkBomb,
    hugeFile,
    memoryHog,
  ].map((f) => [f.name, f]),
);

export const FORGERY_NAMES: readonly string[] = Object.keys(FORGERIES);

/** The forgeries worth trying on a task here, in library order. */
export function forgeriesFor(task: RolloutTask, place?: ForgeryPlace): Forgery[] {
  return Object.values(FORGERIES).filter((f) => f.applies(task, place));
}
