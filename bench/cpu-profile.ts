/**
 * A V8 CPU profile (`node --cpu-prof`) as text for bench/RESULTS.md: where a process's CPU went,
 * per call.
 *
 * - "self": time spent in each function's own code (native work a function calls, JSON.parse or a
 *   SQLite statement, counts as its caller's self time, since builtins are not frames), with
 *   idle time left out of the total;
 * - "flame graph": the call tree from polar's outermost frames (or each root named with --root),
 *   callers above callees, siblings
 *   merged by name, each line its inclusive time, ms per call and share of the busy total, down to
 *   --min percent (a text icicle: read it as a flame graph turned upside down).
 *
 *   npx tsx bench/cpu-profile.ts PROFILE.cpuprofile [--calls N] [--root NAME]... [--min 1] [--top 25]
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const NOT_BUSY = new Set(['(idle)', '(program)']);

export function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^.*\/(src|dist|node_modules|bench)\//, '$1/').replace(/^file:\/\//, '');
  return `${functionName || '(anonymous)'}${where ? ` ${where}:${lineNumber + 1}` : ''}`;
}

/** Each node's own sampled time (µs), and the busy total. */
export function selfTimes(profile: Profile): { self: Map<number, number>; busy: number } {
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let busy = 0;
  for (const [id, t] of self) if (!NOT_BUSY.has(byId.get(id)!.callFrame.functionName)) busy += t;
  return { self, busy };
}

function report(profile: Profile, opts: { calls: number; roots: string[]; minPercent: number; top: number }): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const { self, busy } = selfTimes(profile);
  const perCall = (us: number) => (us / 1000 / opts.calls).toFixed(3);
  const pct = (us: number) => ((100 * us) / busy).toFixed(1);
  const lines: string[] = [];

  const byName = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    if (NOT_BUSY.has(n.callFrame.functionName)) continue;
    const name = frameName(n);
    byName.set(name, (byName.get(name) ?? 0) + t);
  }
  lines.push(`Busy CPU ${(busy / 1000).toFixed(0)} ms over ${opts.calls} calls: ${perCall(busy)} ms per call.`, '');
  lines.push('| self, ms per call | share | function |', '|---:|---:|---|');
  for (const [name, t] of [...byName].sort((a, b) => b[1] - a[1]).slice(0, opts.top)) lines.push(`| ${perCall(t)} | ${pct(t)}% | \`${name}\` |`);

  const total = new Map<number, number>();
  const inclusive = (id: number): number => {
    const known = total.get(id);
    if (known !== undefined) return known;
    let t = self.get(id) ?? 0;
    for (const c of byId.get(id)!.children ?? []) t += inclusive(c);
    total.set(id, t);
    return t;
  };
  const tree: string[] = [];
  const walk = (ids: number[], depth: number) => {
    const merged = new Map<string, { t: number; children: number[] }>();
    for (const id of ids) {
      const n = byId.get(id)!;
      const e = merged.get(frameName(n)) ?? { t: 0, children: [] };
      e.t += inclusive(id);
      e.children.push(...(n.children ?? []));
      merged.set(frameName(n), e);
    }
    for (const [name, e] of [...merged].sort((a, b) => b[1].t - a[1].t)) {
      if ((100 * e.t) / busy < opts.minPercent) continue;
      tree.push(`${'  '.repeat(depth)}${perCall(e.t).padStart(7)} ms ${pct(e.t).padStart(5)}%  ${name}`);
      walk(e.children, depth + 1);
    }
  };
  // Roots: the outermost frames named with --root; by default the outermost frames of polar's own
  // code (src/ or dist/), wherever an async continuation resumed them, so each stage of a call
  // (prepare, relay, commit) is a root however Node's task queue called it.
  const isRoot = opts.roots.length
    ? (n: ProfileNode) => opts.roots.includes(n.callFrame.functionName)
    : (n: ProfileNode) => /\/(src|dist)\//.test(n.callFrame.url) && !n.callFrame.url.includes('node_modules');
  const outer: number[] = [];
  const findOuter = (id: number) => {
    const n = byId.get(id)!;
    if (isRoot(n)) outer.push(id);
    else for (const c of n.children ?? []) findOuter(c);
  };
  findOuter(profile.nodes[0]!.id);
  walk(outer, 0);
  const gc = [...self].filter(([id]) => byId.get(id)!.callFrame.functionName === '(garbage collector)').reduce((s, [, t]) => s + t, 0);
  lines.push('', `Garbage collection: ${perCall(gc)} ms per call (${pct(gc)}%), outside the tree below.`, '', '```', ...tree, '```');
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const flag = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  const file = args.find((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: npx tsx bench/cpu-profile.ts PROFILE.cpuprofile [--calls N] [--root NAME]... [--min PERCENT] [--top N]\n');
    process.exit(2);
  }
  const roots = args.flatMap((a, i) => (args[i - 1] === '--root' ? [a] : []));
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  process.stdout.write(
    `${report(profile, { calls: Number(flag('--calls') ?? 1), roots, minPercent: Number(flag('--min') ?? 1), top: Number(flag('--top') ?? 25) })}\n`,
  );
}
