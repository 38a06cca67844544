import { shellQuote } from '../../../core/process/shell.js';
import { parseOutcomes, readReport } from './report-file.js';
import type { TestRunner } from './types.js';

/**
 * What both Python runners do first, before any file of the workspace can be imported. The
 * interpreter runs with -I (isolated: no script folder or current folder on sys.path, no PYTHON*
 * variables, no user site-packages), so a workspace `unittest.py` or `pytest.py` cannot stand in for
 * the runner. The runner and the standard library are imported; only then does the workspace join
 * sys.path, after the standard library and before site-packages, where `python -m` would have put
 * it first: the code under test imports as usual and may still shadow an installed package (a
 * checkout of the package the task fixes), never the runner or the standard library it uses. The
 * report goes to a temporary name and is renamed into place once complete, so a run cut short
 * leaves none.
 */
const PROLOGUE = `import json, os, sys
_report_dir = os.environ["POLAR_REPORT_DIR"]
_site = next((i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))), len(sys.path))
def _polar_path():
    sys.path.insert(_site, os.getcwd())
def _polar_write(results):
    tmp = os.path.join(_report_dir, ".report.tmp")
    with open(tmp, "w") as f:
        json.dump({"tests": results}, f)
    os.replace(tmp, os.path.join(_report_dir, "report.json"))
`;

/**
 * unittest through polar's own result class: each test's id (module.Class.method) and outcome; an
 * expected failure counts as passed, an unexpected success as failed (unittest's own
 * wasSuccessful), a failed subTest fails its test. A name that does not load is a failed test of
 * that name.
 */
const UNITTEST = `${PROLOGUE}import unittest
_polar_path()
_results = {}
class _PolarResult(unittest.TextTestResult):
    def _set(self, test, outcome):
        key = test.id()
        if _results.get(key) != "failed":
            _results[key] = outcome
    def addSuccess(self, test):
        super().addSuccess(test); self._set(test, "passed")
    def addFailure(self, test, err):
        super().addFailure(test, err); self._set(test, "failed")
    def addError(self, test, err):
        super().addError(test, err); self._set(test, "failed")
    def addSkip(self, test, reason):
        super().addSkip(test, reason); self._set(test, "skipped")
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); self._set(test, "passed")
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); self._set(test, "failed")
    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            _results[test.id()] = "failed"
_suite = unittest.TestSuite()
_loader = unittest.TestLoader()
for _name in sys.argv[1:]:
    try:
        _suite.addTest(_loader.loadTestsFromName(_name))
    except Exception as _e:
        print(f"polar: cannot load {_name}: {_e!r}", file=sys.stderr)
        _results[_name] = "failed"
unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=_PolarResult).run(_suite)
_polar_write(_results)
`;

/**
 * pytest through pytest.main with polar's plugin object recording each node id's outcome (a
 * failed setup, call or teardown fails it; xfail counts as passed, as SWE-bench counts XFAIL; a
 * collection error fails the node it names). Its configuration is polar's: \`-c /dev/null\` (no
 * pytest.ini, pyproject.toml, setup.cfg or tox.ini of the workspace, hence no addopts, pythonpath or
 * -p from there), --rootdir the workspace, conftest files only from the folder the named tests
 * share down (--confcutdir), no cache, plugin autoload off and PYTEST_ADDOPTS / PYTEST_PLUGINS
 * cleared.
 */
const PYTEST = `${PROLOGUE}for _k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
    os.environ.pop(_k, None)
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
import pytest
_polar_path()
_results = {}
def _set(nodeid, outcome):
    if _results.get(nodeid) != "failed":
        _results[nodeid] = outcome
class _PolarPlugin:
    def pytest_runtest_logreport(self, report):
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            _results[report.nodeid] = "passed" if xfail and report.when == "call" else "failed"
        elif report.skipped:
            _set(report.nodeid, "passed" if xfail else "skipped")
        elif report.when == "call":
            _set(report.nodeid, "failed" if xfail else "passed")
    def pytest_collectreport(self, report):
        if report.failed:
            _results[report.nodeid] = "failed"
_sep = sys.argv.index("--")
_confcut = sys.argv[1]
pytest.main(["-c", os.devnull, "--rootdir", os.getcwd(), "--confcutdir", _confcut, "-p", "no:cacheprovider", "-q", *sys.argv[2:_sep], "--", *sys.argv[_sep + 1:]], plugins=[_PolarPlugin()])
_polar_write(_results)
`;

function pythonCommand(code: string, args: readonly string[]): string {
  return ['python3', '-I', '-c', code, ...args].map(shellQuote).join(' ');
}

export const unittestRunner: TestRunner = {
  name: 'unittest',
  // unittest takes no options that matter here: the names are all it is given.
  command: (ids) => pythonCommand(UNITTEST, ids),
  read: async (dir) => parseOutcomes(await readReport(dir, 'report.json')),
  // unittest ids are dotted: a module or class names every test under it.
  covers: (id, test) => test === id || test.startsWith(`${id}.`),
  configFiles: [],
};

export const pytestRunner: TestRunner = {
  name: 'pytest',
  command: (ids, args) => pythonCommand(PYTEST, [confcutdir(ids), ...args, '--', ...ids]),
  read: async (dir) => parseOutcomes(await readReport(dir, 'report.json')),
  // pytest node ids: a file, a class or a test names its tests (`f.py`, `f.py::C`, `f.py::C::t`, `f.py::t[p]`).
  covers: (id, test) => test === id || test.startsWith(`${id}::`) || (!id.includes('::') && id.endsWith('/') && test.startsWith(id)),
  // A conftest.py is code pytest runs before any test: the task's version only.
  configFiles: ['**/conftest.py'],
};

/** The deepest folder every named test lies in: conftest files above it are not the task's tests' and are not loaded. */
export function confcutdir(ids: readonly string[]): string {
  const dirs = ids.map((id) => {
    const file = id.split('::')[0]!;
    const parts = file.split('/').filter((p) => p !== '' && p !== '.');
    return file.endsWith('.py') ? parts.slice(0, -1) : parts;
  });
  if (dirs.length === 0) return '.';
  let common = dirs[0]!;
  for (const d of dirs.slice(1)) {
    let i = 0;
    while (i < common.length && i < d.length && common[i] === d[i]) i++;
    common = common.slice(0, i);
  }
  return common.length === 0 ? '.' : common.join('/');
}
