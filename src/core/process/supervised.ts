import { createWriteStream } from 'node:fs';
import { execa } from 'execa';
import { type CommandLine, exitStatus } from './command-line.js';

/** A long-running child (a trainer): its own process group, every line logged and handed on. */
export interface Supervised {
  readonly pid: number | undefined;
  /** Resolves with the exit code (128 + n for a signal) once the child has ended. */
  readonly done: Promise<number>;
  /** Signals the whole process group (Ctrl-C forwarded: SIGINT; a second: SIGKILL). */
  signal(signal: NodeJS.Signals): void;
}

export function startSupervised(cmd: CommandLine, opts: { cwd: string; logFile: string; onLine?: (line: string) => void }): Supervised {
  const log = createWriteStream(opts.logFile, { flags: 'a', mode: 0o600 });
  log.write(`# ${new Date().toISOString()} ${[cmd.file, ...cmd.args].map((a) => JSON.stringify(a)).join(' ')}\n`);
  const child = execa(cmd.file, cmd.args, {
    cwd: opts.cwd,
    env: cmd.env,
    extendEnv: false,
    reject: false,
    detached: true,
    stdin: 'ignore',
    buffer: false,
    all: true,
  });
  let partial = '';
  child.all?.on('data', (d: Buffer) => {
    log.write(d);
    const text = partial + d.toString('utf8');
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) opts.onLine?.(line);
  });
  const done = (async () => {
    const result = await child;
    if (partial) opts.onLine?.(partial);
    await new Promise<void>((resolve) => log.end(resolve));
    return exitStatus(result);
  })();
  return {
    pid: child.pid,
    done,
    signal(signal) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // already gone
      }
    },
  };
}
