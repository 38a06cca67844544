/**
 * The fleet check (issue 43): simulated hosts on a bridge, no shared disk, a queued rollout of dir,
 * git and Harbor tasks through a host SIGKILLed, a host cut off past its lease and a PostgreSQL
 * restart; prints each check PASS/FAIL and the fleet's measures. Linux, as root (network and mount
 * namespaces), after `npm run build` (the hosts run bin/polar.js):
 *
 *   npx tsx scripts/fleet-check.ts --hosts 16 [--per-host 2] [--group 2] [--harbor 2] [--lease S (0: polar's default)]
 *       [--no-faults] [--shared-disk] [--max-connections 100] [--pgbouncer] [--keep] [--json]
 *
 * Exit 0 when every check passed, 1 when one failed, 2 when it could not run.
 */
import { parseArgs } from 'node:util';
import { DEFAULTS, FleetRun } from '../test/support/fleet/run.js';
import { reportText } from '../test/support/fleet/report.js';
import { namespacesUnavailable } from '../test/support/netns.js';

const { values } = parseArgs({
  options: {
    hosts: { type: 'string' },
    'per-host': { type: 'string' },
    group: { type: 'string' },
    harbor: { type: 'string' },
    concurrency: { type: 'string' },
    lease: { type: 'string' },
    'pg-down': { type: 'string' },
    supervise: { type: 'string' },
    sleep: { type: 'string' },
    calls: { type: 'string' },
    'no-faults': { type: 'boolean' },
    'shared-disk': { type: 'boolean' },
    'max-connections': { type: 'string' },
    pgbouncer: { type: 'boolean' },
    'bouncer-pool': { type: 'string' },
    'pg-pool': { type: 'string' },
    keep: { type: 'boolean' },
    octet: { type: 'string' },
    timeout: { type: 'string' },
    'idle-window': { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});

if (values.help) {
  process.stdout.write(
    `usage: npx tsx scripts/fleet-check.ts [--hosts N (${DEFAULTS.hosts})] [--per-host N (${DEFAULTS.perHost})] [--group N (${DEFAULTS.group})]
  [--harbor N (${DEFAULTS.harbor})] [--concurrency N (${DEFAULTS.concurrency})] [--lease S (${DEFAULTS.leaseS})] [--pg-down S (${DEFAULTS.pgDownS})]
  [--supervise S (0: polar's default)]
  [--sleep S (${DEFAULTS.sleepS})] [--calls N (${DEFAULTS.calls})] [--no-faults] [--shared-disk] [--max-connections N (${DEFAULTS.maxConnections})]
  [--pgbouncer] [--bouncer-pool N (${DEFAULTS.bouncerPool})] [--pg-pool N (0: polar's default)] [--keep] [--octet N (${DEFAULTS.octet})] [--timeout S (${DEFAULTS.timeoutS})] [--idle-window S (${DEFAULTS.idleWindowS})] [--json]
Run as root on Linux after npm run build. Exit 0: every check passed; 1: one failed; 2: it could not run.\n`,
  );
  process.exit(0);
}

const num = (name: string, v: string | undefined, fallback: number): number => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) {
    process.stderr.write(`--${name} must be a number ≥ 0 (got "${v}")\n`);
    process.exit(2);
  }
  return n;
};

const skip = namespacesUnavailable();
if (skip) {
  process.stderr.write(`fleet check cannot run here: ${skip}\n`);
  process.exit(2);
}

const log = (line: string) => process.stderr.write(`${line}\n`);
const run = new FleetRun({
  hosts: num('hosts', values.hosts, DEFAULTS.hosts),
  perHost: num('per-host', values['per-host'], DEFAULTS.perHost),
  group: num('group', values.group, DEFAULTS.group),
  harbor: num('harbor', values.harbor, DEFAULTS.harbor),
  concurrency: num('concurrency', values.concurrency, DEFAULTS.concurrency),
  leaseS: num('lease', values.lease, DEFAULTS.leaseS),
  pgDownS: num('pg-down', values['pg-down'], DEFAULTS.pgDownS),
  superviseS: num('supervise', values.supervise, DEFAULTS.superviseS),
  sleepS: num('sleep', values.sleep, DEFAULTS.sleepS),
  calls: num('calls', values.calls, DEFAULTS.calls),
  faults: values['no-faults'] !== true,
  sharedDisk: values['shared-disk'] === true,
  maxConnections: num('max-connections', values['max-connections'], DEFAULTS.maxConnections),
  pgbouncer: values.pgbouncer === true,
  bouncerPool: num('bouncer-pool', values['bouncer-pool'], DEFAULTS.bouncerPool),
  pgPool: num('pg-pool', values['pg-pool'], DEFAULTS.pgPool),
  keep: values.keep === true,
  octet: num('octet', values.octet, DEFAULTS.octet),
  timeoutS: num('timeout', values.timeout, DEFAULTS.timeoutS),
  idleWindowS: num('idle-window', values['idle-window'], DEFAULTS.idleWindowS),
  log,
});

// Ctrl-C or a kill: the namespaces, bridge, PostgreSQL and processes go with the check.
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log(`fleet check: ${signal}; cleaning up`);
    void run.cleanup().finally(() => process.exit(130));
  });

try {
  const report = await run.run();
  await run.cleanup();
  process.stdout.write(`${values.json ? JSON.stringify(report, null, 2) : reportText(report)}\n`);
  process.exitCode = report.ok ? 0 : 1;
} catch (err) {
  log(`fleet check could not run: ${(err as Error).stack ?? err}`);
  await run.cleanup();
  process.exitCode = 2;
}
