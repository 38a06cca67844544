import { shellQuote } from '../../../core/process/shell.js';
import { parseOutcomes, readReport } from './report-file.js';
import type { TestRunner } from './types.js';

/**
 * node's test runner (`node --test FILE…`, run by the task, never a package.json script) with a
 * reporter of polar's, given as a data: URL so nothing of it lies where the agent's code could
 * change it. The reporter runs in the orchestrating process, apart from the test files' own
 * processes, and records each test by file and name path (`test.js > suite > case`); a test marked
 * skip or todo is skipped; a file whose process ended before any test ran reports only itself and
 * names no test. NODE_OPTIONS is cleared: the task's command line is the whole configuration.
 */
const REPORTER = `import path from 'node:path';
export default async function* polarReport(source) {
  const tests = {};
  const stacks = new Map();
  for await (const event of source) {
    const d = event.data ?? {};
    if (!d.file || typeof d.nesting !== 'number') continue;
    const file = path.relative(process.cwd(), d.file);
    const stack = stacks.get(file) ?? [];
    stacks.set(file, stack);
    if (event.type === 'test:start') { stack.length = d.nesting; stack[d.nesting] = d.name; continue; }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (d.details?.type === 'suite') continue;
    if (d.nesting === 0 && path.resolve(d.name) === path.resolve(d.file)) continue;
    const id = [file, ...stack.slice(0, d.nesting), d.name].join(' > ');
    const outcome = d.skip || d.todo ? 'skipped' : event.type === 'test:pass' ? 'passed' : 'failed';
    if (tests[id] !== 'failed') tests[id] = outcome;
  }
  yield JSON.stringify({ tests });
}
`;

const REPORTER_URL = `data:text/javascript,${encodeURIComponent(REPORTER)}`;

export const nodeTestRunner: TestRunner = {
  name: 'node-test',
  // The files the ids name, each once; the report (JSON) goes to a temporary name first, like the Python runners'.
  command: (ids, args) => {
    const files = [...new Set(ids.map((id) => id.split(' > ')[0]!))];
    const run = ['node', '--test', `--test-reporter=${REPORTER_URL}`, '--test-reporter-destination=$POLAR_REPORT_DIR/.report.tmp', ...args, '--', ...files];
    const quoted = run.map((a) => (a.includes('$POLAR_REPORT_DIR') ? `"${a}"` : shellQuote(a))).join(' ');
    return `unset NODE_OPTIONS; ${quoted}; rc=$?; [ -s "$POLAR_REPORT_DIR/.report.tmp" ] && mv "$POLAR_REPORT_DIR/.report.tmp" "$POLAR_REPORT_DIR/report.json"; exit $rc`;
  },
  read: async (dir) => parseOutcomes(await readReport(dir, 'report.json')),
  // A file names all of its tests; a suite all of its cases.
  covers: (id, test) => test === id || test.startsWith(`${id} > `),
  configFiles: [],
};
