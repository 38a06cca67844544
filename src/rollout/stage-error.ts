/**
 * A sample's failure at one stage: `init` (building the workspace), `run` (the agent), or `post`
 * (diff, verifier, reward). Its own file so the workspace and the Harbor trial, which builds a
 * Harbor task's workspace, can both raise it without importing each other.
 */
export class StageError extends Error {
  override name = 'StageError';
  constructor(
    readonly stage: 'init' | 'run' | 'post',
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
  }
}
