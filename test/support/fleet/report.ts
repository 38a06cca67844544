import type { FleetReport } from './run.js';

/** The fleet check's report as a person reads it: each check PASS or FAIL with its evidence, then the measures. */
export function reportText(r: FleetReport): string {
  const out: string[] = [];
  const o = r.options;
  out.push(
    `polar fleet check: ${o.hosts} hosts, ${r.metrics.samples} samples (${o.group} per task, ${o.harbor} Harbor tasks), lease ${o.leaseS > 0 ? `${o.leaseS} s` : "polar's default"}, ` +
      `${o.faults ? 'faults: host 0 SIGKILLed, host 1 cut off, PostgreSQL restarted' : 'no faults'}, ${o.sharedDisk ? 'shared disk' : 'no shared disk'}, max_connections ${o.maxConnections}`,
  );
  out.push(`polar: ${r.polar}`);
  out.push('');
  for (const c of r.checks) {
    out.push(`${c.ok ? 'PASS' : 'FAIL'}  ${c.name}`);
    for (const d of c.detail.slice(0, 12)) out.push(`      ${d}`);
    if (c.detail.length > 12) out.push(`      … ${c.detail.length - 12} more (--json has them all)`);
  }
  out.push('');
  const m = r.metrics;
  out.push(`sessions/min: ${m.sessionsPerMin.toFixed(1)} (${m.samples} samples in ${m.wallS.toFixed(0)} s)`);
  out.push(
    `PostgreSQL connections: peak ${m.peakConnections} from all hosts; idle transactions ${m.idleXactPerS.toFixed(2)}/s in all, ${m.idleXactPerWorkerPerS.toFixed(2)}/s per worker`,
  );
  out.push('host  address       fault            max conns  idle stmts/s  samples ended');
  for (const h of m.hosts)
    out.push(
      `${String(h.host).padEnd(5)} ${h.address.padEnd(13)} ${(h.fault ?? '-').padEnd(16)} ${String(h.maxConnections).padStart(9)}  ${h.idleStatementsPerS.toFixed(2).padStart(12)}  ${String(h.ended).padStart(13)}`,
    );
  out.push('');
  out.push(r.ok ? 'fleet check: PASS' : `fleet check: FAIL (${r.checks.filter((c) => !c.ok).length} of ${r.checks.length} checks)`);
  if (r.dir) out.push(`kept: ${r.dir} (hosts/N/worker.log, coord/*.log)`);
  return out.join('\n');
}
