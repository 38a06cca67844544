/**
 * A sample's failure at one stage: `init` (building the workspace), `run` (the agent), or `post`
 * (diff, verifier, reward). Its own file so the workspace and the Harbor trial, which builds a
 * Harbor task's workspace, can both raise it without importing each other.
 */
export class StageError extends Error {
  override name = 'StageError';
  /** The stage's own budget ran out (a sample ends `timeout` rather than `error`, except at POSTRUN). */
  readonly timedOut: boolean;
  /**
   * `cause`: the error this one wraps, kept as ES2022's `Error.cause` (as undici's errors keep
   * theirs) so a stack trace or a debugger still reaches the line that failed, not only the
   * message polar wrote over it.
   */
  constructor(
    readonly stage: 'init' | 'run' | 'post',
    message: string,
    options: StageErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.timedOut = options.timedOut ?? false;
  }
}

export interface StageErrorOptions {
  timedOut?: boolean;
  cause?: unknown;
}

/**
 * What the agent did to itself stopped polar from grading it (issue 39, item 4): a cap it hit, a
 * workspace polar will not diff (over the diff's caps, a file it made unreadable), a link where
 * polar collects its files, artifacts over their cap. The sample scores 0 with this message as its
 * evaluator's `forfeit` and keeps its session's status. Never `error`: under GRPO a sample that ends
 * `error` leaves its group, so a policy that can reach `error` on purpose learns to leave a group it
 * would score 0 in. `error` (StageError) stays for what the agent cannot cause: polar or the machine.
 */
export class Forfeit extends Error {
  override name = 'Forfeit';
}
