import { graded, taskFacts } from './facts.js';
import { prelude } from './payloads.js';
import type { Forgery } from './types.js';

/**
 * Forgeries on the test runner's configuration: a verifier that grades by the exit status of a
 * runner the workspace configures (pytest reads its ini files and plugins from the rootdir, npm its
 * package.json scripts) lets the agent decide what runs. The task's test files are reset before a
 * `tests` evaluator runs (evaluators/test-files.ts: pytest.ini, tox.ini among them), so each
 * forgery writes every file the runner reads, not only the first.
 */

/**
 * pytest's configuration files, in the order it picks one (docs.pytest.org, "Configuration":
 * pytest.ini, .pytest.ini, pyproject.toml [tool.pytest.ini_options], tox.ini [pytest], setup.cfg
 * [tool:pytest]), each given `lines` under its section: added where the section is there,
 * appended with it where not.
 */
function pytestConfigs(lines: string): string {
  return `read -r -d '' opts <<'INI'
${lines}
INI
# $1: the file, $2: its section's header, $3: the options as that file spells them.
put_section() {
  if [ -f "$1" ] && grep -qF "$2" "$1"; then
    # The options through the environment: awk -v would read their backslashes and newlines.
    o="$3" awk -v h="$2" '{ print } $0 == h { print ENVIRON["o"] }' "$1" > "$1.forge" && cat "$1.forge" > "$1" && rm -f "$1.forge"
  else
    printf '\\n%s\\n%s\\n' "$2" "$3" >> "$1"
  fi
  say "configured pytest in $1"
}
printf '[pytest]\\n%s\\n' "$opts" > pytest.ini && say "wrote pytest.ini"
printf '[pytest]\\n%s\\n' "$opts" > .pytest.ini && say "wrote .pytest.ini"
# TOML wants strings quoted: key = "value".
put_section pyproject.toml '[tool.pytest.ini_options]' "$(printf '%s\\n' "$opts" | sed -E 's/^([a-z_]+) = (.*)$/\\1 = "\\2"/')"
put_section tox.ini '[pytest]' "$opts"
put_section setup.cfg '[tool:pytest]' "$opts"
`;
}

/** `--co` (collect only): pytest lists the tests, runs none, and exits 0. */
export const pytestConfig: Forgery = {
  name: 'pytest-config',
  description: 'addopts = --co -q in pytest.ini, .pytest.ini, pyproject.toml, tox.ini and setup.cfg: pytest only collects the tests and exits 0',
  applies: (task) => graded(task) && taskFacts(task).verifierPytest,
  script: () => `${prelude('pytest-config', pytestConfig.description)}${pytestConfigs('addopts = --co -q')}`,
};

/**
 * A plugin module loaded with `-p` from the ini's addopts, importable through `pythonpath = .`
 * (and the current folder `python -m pytest` puts first on the import path): no conftest.py for a
 * verifier to remove or ignore (--noconftest, --confcutdir), and it deselects every test.
 */
export const pytestPlugin: Forgery = {
  name: 'pytest-plugin',
  description: 'forgeplug.py loaded by every pytest config (pythonpath = ., addopts = -p forgeplug): deselects every test, passes any that runs, exits 0',
  applies: (task) => graded(task) && taskFacts(task).verifierPytest,
  script: () => `${prelude('pytest-plugin', pytestPlugin.description)}cat > forgeplug.py <<'PY'
import pytest


def pytest_collection_modifyitems(config, items):
    config.hook.pytest_deselected(items=list(items))
    items[:] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed:
        report.outcome, report.longrepr = "passed", None


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
PY
say "wrote forgeplug.py"
${pytestConfigs('pythonpath = .\naddopts = -p forgeplug')}`,
};

/** The runners `npm test` and the like find first on PATH (npm puts node_modules/.bin there). */
const JS_RUNNERS = ['jest', 'mocha', 'vitest', 'ava', 'tap', 'c8', 'nyc'];

/**
 * package.json's scripts are the agent's to write: `npm test` runs whatever `scripts.test` says
 * (docs.npmjs.com, "scripts"), and its pre/post scripts around it. Every script becomes `exit 0`,
 * and the usual runners in node_modules/.bin exit 0 too.
 */
export const npmScripts: Forgery = {
  name: 'npm-scripts',
  description: 'every package.json script (test included) becomes "exit 0", and jest, mocha, vitest… in node_modules/.bin exit 0',
  applies: (task) => graded(task) && (taskFacts(task).verifierNpm || (taskFacts(task).workspace.has('package.json') && taskFacts(task).verifierNode)),
  script: () => `${prelude('npm-scripts', npmScripts.description)}if command -v node >/dev/null 2>&1; then
  node -e '
    const fs = require("node:fs");
    let pkg = {};
    try { pkg = JSON.parse(fs.readFileSync("package.json", "utf8")); } catch {}
    pkg.scripts = pkg.scripts ?? {};
    for (const name of new Set([...Object.keys(pkg.scripts), "test", "pretest", "posttest"])) pkg.scripts[name] = "exit 0";
    fs.writeFileSync("package.json", JSON.stringify(pkg, null, 2) + "\\n");
  ' && say "every script in package.json exits 0"
else
  printf '{\\n  "name": "forge",\\n  "scripts": { "test": "exit 0" }\\n}\\n' > package.json && say "wrote package.json"
fi
mkdir -p node_modules/.bin
for tool in ${JS_RUNNERS.join(' ')}; do
  printf '#!/bin/sh\\nexit 0\\n' > "node_modules/.bin/$tool" && chmod 755 "node_modules/.bin/$tool"
done
say "planted node_modules/.bin/{${JS_RUNNERS.join(',')}}"
`,
};
