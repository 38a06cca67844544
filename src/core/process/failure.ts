/** How a command polar ran ended, as its runner reports it (runCommand, runShell, a container engine's CLI, spawnSync). */
export interface CommandEnd {
  exitCode: number | null;
  signal?: string | null;
  timedOut?: boolean;
  /** Why it could not start at all (`spawn git ENOENT`). */
  startError?: string | null;
  stderr: string;
  /** Read only when stderr says nothing. */
  stdout?: string;
}

/** The most of a tool's reason kept: lines, then characters (a runaway line of output). */
const REASON_LINES = 8;
const REASON_CHARS = 4000;

/**
 * A failed command as a user reads it: `<label> failed (exit N): <the tool's own reason>`, then,
 * when given, what polar ran. The reason is the tool's stderr (toolReason), whole, and it comes
 * first: execa's message starts with the command line, and for git that was 200 characters of
 * polar's `-c` flags that every display cut before git's own words (issue 40). Displays that
 * shorten this for a terminal still show the cause.
 */
export function commandFailure(label: string, end: CommandEnd, ran?: string): string {
  const reason = toolReason(end.stderr, end.stdout);
  const said = `${label} failed (${howEnded(end)})${reason ? `: ${reason}` : ''}`;
  return ran ? `${said} (polar ran: ${ran})` : said;
}

/** exit N, killed by SIGNAL, timed out, or could not start: why. */
export function howEnded(end: CommandEnd): string {
  if (end.timedOut) return 'timed out';
  if (end.startError) return `could not start: ${end.startError}`;
  if (end.exitCode !== null) return `exit ${end.exitCode}`;
  return end.signal ? `killed by ${end.signal}` : 'no exit status';
}

/**
 * What a tool said about its failure: the lines of its stderr that say it (`fatal:` and `error:`
 * from git, `Error:` from podman and docker), else its last lines; stdout only when stderr is
 * empty. Lines are kept whole and joined with ` | `, so the text stays one line in progress output.
 */
export function toolReason(stderr: string, stdout = ''): string {
  const lines = (text: string) =>
    text
      .split(/\r\n|\r|\n/)
      .map((l) => l.trim())
      .filter((l) => l !== '');
  const all = lines(stderr).length > 0 ? lines(stderr) : lines(stdout);
  const said = all.filter((l) => /^(fatal|error)\b/i.test(l));
  const picked = said.length > 0 ? said.slice(0, REASON_LINES) : all.slice(-REASON_LINES);
  const text = picked.join(' | ');
  return text.length > REASON_CHARS ? `${text.slice(0, REASON_CHARS)}…` : text;
}
