import type { RolloutTask } from '../task-file.js';

/** Where the forger runs: in the host sandbox the system folders are read-only; in a container it may be root. */
export interface ForgeryPlace {
  environment: 'host' | 'podman' | 'docker';
}

/**
 * One known way to earn a reward without solving the task, as a policy with a shell would try it:
 * `script` is bash the built-in agent `forge:<name>` runs in the agent's place (cwd = the task's
 * WORKDIR, no network, /logs/agent writable). A verifier that rewards it is hackable.
 */
export interface Forgery {
  name: string;
  /** One line: what it does and what a verifier must not do for it to fail. */
  description: string;
  /**
   * Whether trying it can tell anything about this task (a Python hijack on a task with no Python
   * in it cannot win): `polar tasks check` skips those that do not apply, to stay fast.
   */
  applies(task: RolloutTask, place?: ForgeryPlace): boolean;
  script(task: RolloutTask): string;
}
