/**
 * The forwarder that runs first inside a `proxy-only` sandbox, on the Node runtime polar runs on:
 * it listens on 127.0.0.1:<the proxy's port> in the sandbox's own network namespace and pipes every
 * connection to the proxy's Unix socket, then starts the real command and ends as it ends (the
 * same exit code; a signal as 128 + its number, as a shell reports it). So the harness's base URL
 * keeps its usual `http://127.0.0.1:PORT/s/<session>/v1` form and nothing else is reachable.
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
  const child = spawn(file, args, { stdio: 'inherit' });
  // Interactive: the terminal already sends Ctrl-C to the command, which decides what it means.
  process.on('SIGINT', () => { if (interactive !== '1') child.kill('SIGINT'); });
  for (const s of ['SIGTERM', 'SIGHUP', 'SIGQUIT']) process.on(s, () => child.kill(s));
  child.on('error', (err) => {
    process.stderr.write('polar sandbox: cannot start ' + file + ': ' + err.message + '\n');
    process.exit(127);
  });
  child.on('exit', (code, signal) => process.exit(signal ? 128 + (constants.signals[signal] || 0) : code));
});
`;

/** The argv that runs `file args` behind the bridge. */
export function bridged(nodePath: string, port: number, socketInside: string, interactive: boolean, file: string, args: readonly string[]): string[] {
  return [nodePath, '-e', BRIDGE_SOURCE, '--', String(port), socketInside, interactive ? '1' : '0', file, ...args];
}
