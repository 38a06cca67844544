import { execFile } from 'node:child_process';
import type { CommandLine } from '../core/process/command-line.js';
import { PERL_BRIDGE_SOURCE, PERL_EXEC_SOURCE, PERL_PROBE_SOURCE } from './bridge-perl.js';
import type { ForwarderKind } from './types.js';

/**
 * The forwarder that runs first inside a `proxy-only` sandbox: it listens on 127.0.0.1:<the proxy's
 * port> in the sandbox's own network namespace and pipes every connection to the proxy's Unix
 * socket, then the real command runs, and the sandbox ends as it ends (the same exit code; a signal
 * as 128 + its number, as a shell reports it). So the harness's base URL keeps its usual
 * `http://127.0.0.1:PORT/s/<session>/v1` form and nothing else is reachable.
 *
 * Two programs do it: Perl (bridge-perl.ts) where the host has it, since a Node start-up was most
 * of a proxy-only sample's start-up (issue 33), else Node, on the runtime polar runs on.
 */
export interface Forwarder {
  kind: ForwarderKind;
  /** The interpreter, at a path the sandbox's view shows (/usr, /bin, or Node's own prefix). */
  program: string;
}

let perl: Promise<string | null> | undefined;

/**
 * The forwarder for this process: Perl at a system path (never PATH's, which is the user's) where
 * the probe runs (bridge-perl.ts: Linux's socket numbers work there), looked for once and without
 * blocking; else Node. `prefer: 'node'` forces Node (the start-up bench compares the two).
 */
export async function findForwarder(prefer?: ForwarderKind): Promise<Forwarder> {
  const node: Forwarder = { kind: 'node', program: process.execPath };
  if (prefer === 'node') return node;
  perl ??= probePerl();
  const found = await perl;
  return found ? { kind: 'perl', program: found } : node;
}

async function probePerl(): Promise<string | null> {
  for (const file of ['/usr/bin/perl', '/bin/perl']) {
    const ok = await new Promise<boolean>((resolve) => {
      execFile(file, ['-e', PERL_PROBE_SOURCE], { env: {}, timeout: 10_000 }, (err) => resolve(!err));
    });
    if (ok) return file;
  }
  return null;
}

/**
 * The Node forwarder. It listens, then starts the command as its child and forwards the signals a
 * terminal or polar sends (SIGINT only when not interactive: at a terminal the command already
 * gets it, and decides what it means).
 *
 * Run as `node -e BRIDGE_SOURCE -- PORT SOCKET INTERACTIVE FILE ARGS…`: no file to ship into the
 * sandbox, and nothing to start but Node itself. Plain CommonJS so `-e` runs it as is.
 */
export const BRIDGE_SOURCE = String.raw`
const net = require('node:net');
const { spawn } = require('node:child_process');
const { constants } = require('node:os');
const [port, socket, interactive, file, ...args] = process.argv.slice(1);
const server = net.createServer((client) => {
  const upstream = net.connect(socket);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
});
server.on('error', (err) => {
  process.stderr.write('polar sandbox bridge: cannot listen on 127.0.0.1:' + port + ': ' + err.message + '\n');
  process.exit(125);
});
server.listen(Number(port), '127.0.0.1', () => {
  // The handlers go in before the spawn: a command that signals its process group at once
  // (kill 0) would otherwise end the bridge before they were there (it did, 7 times in 30).
  // One that comes before the command has started ends the bridge, as it would have.
  let child = null;
  const early = (s) => process.exit(128 + constants.signals[s]);
  // Interactive: the terminal already sends Ctrl-C and Ctrl-\ to the command, which decides what they mean.
  for (const s of ['SIGINT', 'SIGQUIT']) process.on(s, () => { if (!child) early(s); else if (interactive !== '1') child.kill(s); });
  for (const s of ['SIGTERM', 'SIGHUP']) process.on(s, () => (child ? child.kill(s) : early(s)));
  child = spawn(file, args, { stdio: 'inherit' });
  child.on('error', (err) => {
    process.stderr.write('polar sandbox: cannot start ' + file + ': ' + err.message + '\n');
    process.exit(127);
  });
  child.on('exit', (code, signal) => process.exit(signal ? 128 + (constants.signals[signal] || 0) : code));
});
`;

/**
 * `cmd` behind the bridge, with `forwarder`; Node's where the command's environment sets PERL5OPT,
 * whose switches (a -M of a module the sandbox does not show) Perl would apply first. Perl starts
 * with PERL_BADLANG=0 unless the command's environment says otherwise (a LANG this machine has no
 * locale for would make it print five lines of warning per sample) and drops it before the exec.
 */
export function bridgeCommand(forwarder: Forwarder, port: number, socketInside: string, interactive: boolean, cmd: CommandLine): CommandLine {
  if (forwarder.kind === 'perl' && !cmd.env.PERL5OPT) {
    const quiet = cmd.env.PERL_BADLANG === undefined;
    return {
      file: forwarder.program,
      args: ['-e', PERL_BRIDGE_SOURCE, '--', String(port), socketInside, quiet ? '1' : '0', cmd.file, ...cmd.args],
      env: quiet ? { ...cmd.env, PERL_BADLANG: '0' } : cmd.env,
    };
  }
  const [file, ...args] = bridged(forwarder.kind === 'node' ? forwarder.program : process.execPath, port, socketInside, interactive, cmd.file, cmd.args);
  return { file: file!, args, env: cmd.env };
}

/**
 * `cmd` with SIGINT and SIGQUIT back to their defaults (bridge-perl.ts PERL_EXEC_SOURCE), for an
 * interactive sandbox without the bridge, whose bwrap starts with them ignored (jail.ts); null where
 * Perl is not at hand or the command's environment sets PERL5OPT (see bridgeCommand).
 */
export function withTerminalSignals(forwarder: Forwarder, cmd: CommandLine): CommandLine | null {
  if (forwarder.kind !== 'perl' || cmd.env.PERL5OPT) return null;
  const quiet = cmd.env.PERL_BADLANG === undefined;
  return {
    file: forwarder.program,
    args: ['-e', PERL_EXEC_SOURCE, '--', quiet ? '1' : '0', cmd.file, ...cmd.args],
    env: quiet ? { ...cmd.env, PERL_BADLANG: '0' } : cmd.env,
  };
}

/**
 * The argv that runs `file args` behind the Node forwarder: a container's (harbor/container.ts),
 * whose image need not have Perl, mounts the Node runtime polar runs on.
 */
export function bridged(nodePath: string, port: number, socketInside: string, interactive: boolean, file: string, args: readonly string[]): string[] {
  return [nodePath, '-e', BRIDGE_SOURCE, '--', String(port), socketInside, interactive ? '1' : '0', file, ...args];
}
