// A stand-in for polar launched with extra descriptors open (test/integration/inherited-fds.test.ts):
// runs one shell command through the built sandbox (dist/: `npx tsc -p tsconfig.build.json` first)
// as every sandboxed command runs, and prints the command's result as JSON.
import { runShell } from '../../dist/core/process/shell.js';
import { DEFAULT_LIMITS, findBwrap, openJail } from '../../dist/sandbox/index.js';

const [workspace, command] = process.argv.slice(2);
const settings = { kind: 'bwrap', bwrap: findBwrap(), network: 'host', limits: DEFAULT_LIMITS, extraReadOnly: [] };
const jail = await openJail(settings, { cwd: workspace, network: 'none' });
const r = await runShell(command, { cwd: workspace, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, timeoutMs: 60_000, wrap: (c) => jail.wrap(c) });
await jail.close({ exitCode: r.exitCode, signal: r.signal });
process.stdout.write(JSON.stringify(r));
