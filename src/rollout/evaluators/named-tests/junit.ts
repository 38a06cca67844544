import { readReport } from './report-file.js';
import type { TestOutcome } from './types.js';

/**
 * A JUnit XML report (pytest --junitxml, Maven Surefire, node's junit reporter, go-junit-report…)
 * as outcomes by `classname.name` (just `name` where there is no classname): a <testcase> with a
 * <failure> or <error> failed, one with <skipped> was skipped, any other passed. A test named twice
 * (a rerun) fails if any run of it failed. Only what polar needs of the format is read: the
 * testcase elements and their attributes, with XML's five entities and character references.
 */
export function parseJunit(xml: string): Map<string, TestOutcome> {
  if (!/<testsuites?[\s>]/.test(xml) && !/<testcase[\s>/]/.test(xml)) throw new Error('the report is not JUnit XML (no <testsuite> or <testcase>)');
  const out = new Map<string, TestOutcome>();
  const cases = /<testcase\b((?:[^>"']|"[^"]*"|'[^']*')*?)(\/>|>([\s\S]*?)<\/testcase\s*>)/g;
  for (const m of xml.matchAll(cases)) {
    const attrs = attributes(m[1]!);
    const name = attrs.get('name');
    if (name === undefined) continue;
    const classname = attrs.get('classname');
    const id = classname ? `${classname}.${name}` : name;
    const body = m[3] ?? '';
    const outcome: TestOutcome = /<(failure|error)[\s>/]/.test(body) ? 'failed' : /<skipped[\s>/]/.test(body) ? 'skipped' : 'passed';
    if (out.get(id) !== 'failed') out.set(id, outcome);
  }
  return out;
}

export async function readJunit(reportDir: string): Promise<Map<string, TestOutcome>> {
  return parseJunit(await readReport(reportDir, 'report.xml'));
}

function attributes(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) out.set(m[1]!, decode(m[2] ?? m[3] ?? ''));
  return out;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function decode(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (whole, e: string) => {
    if (e[0] === '#') {
      const code = e[1] === 'x' || e[1] === 'X' ? Number.parseInt(e.slice(2), 16) : Number.parseInt(e.slice(1), 10);
      return Number.isFinite(code) && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[e] ?? whole;
  });
}

/** JUnit ids are dotted (`module.Class.test`): a class or module names every test under it. */
export function junitCovers(id: string, test: string): boolean {
  return test === id || test.startsWith(`${id}.`);
}
