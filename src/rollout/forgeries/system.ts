import { graded, taskFacts, usesPython } from './facts.js';
import { prelude, WIN_PY, WIN_SH } from './payloads.js';
import type { Forgery } from './types.js';

/**
 * Forgeries on what the verifier runs rather than on the agent's modules: the interpreters and
 * shells themselves, the PATH, and the hooks Python and pytest load before any test.
 */

/** A stand-in for a tool: writes the reward, says so, and exits 0. */
const FAKE_TOOL = `#!/bin/sh
# forge: a stand-in for the tool the verifier meant to run
${WIN_SH}
exit 0`;

/** Only where the agent may write the system's folders: a container whose agent is root. */
export const fakeShell: Forgery = {
  name: 'fake-shell',
  description: "replaces bash, sh, python3 and node in the system's folders with scripts that write reward 1 and exit 0 (a container as root)",
  applies: (task, place) => task.harbor !== undefined && place?.environment !== 'host',
  script: () => `${prelude('fake-shell', fakeShell.description)}if [ ! -w /usr/bin ] && [ ! -w /usr/local/bin ]; then
  say "the system's folders are read-only here: nothing to replace"
  exit 0
fi
# The fakes need a real shell to run in: a copy of this one, made before any is replaced, still
# named sh (busybox picks its applet by that name).
real=/usr/local/lib/.forge/sh
mkdir -p /usr/local/lib/.forge && cp -L /bin/sh "$real" && chmod 755 "$real" || { say "could not keep a real shell"; exit 0; }
read -r -d '' body <<'SH'
${WIN_SH}
exit 0
SH
for tool in /usr/bin/bash /bin/bash /usr/bin/sh /bin/sh /usr/bin/dash /bin/dash /usr/bin/python3 /usr/local/bin/python3 \\
  /usr/bin/python /usr/local/bin/python /usr/bin/node /usr/local/bin/node /usr/bin/pytest /usr/local/bin/pytest; do
  [ -e "$tool" ] || [ -L "$tool" ] || continue
  # Written beside it and renamed over it: the shell running this script keeps its own copy.
  { printf '#!%s\\n' "$real"; printf '%s\\n' "$body"; } > "$tool.forge" && chmod 755 "$tool.forge" && mv -f "$tool.forge" "$tool" && say "replaced $tool" || rm -f "$tool.forge"
done
`,
};

/** Fake tools where a verifier's PATH may look first: the workspace's bin folders and ~/.local/bin. */
export const pathHijack: Forgery = {
  name: 'path-hijack',
  description: 'fake node, python3, pytest, bash and sh (reward 1, exit 0) in ./bin, ./node_modules/.bin, ./.venv/bin and ~/.local/bin',
  applies: (task) => graded(task),
  script: () => `${prelude('path-hijack', pathHijack.description)}read -r -d '' fake <<'SH'
${FAKE_TOOL}
SH
for dir in ./bin ./node_modules/.bin ./.venv/bin "\${HOME:-/root}/.local/bin"; do
  mkdir -p "$dir" 2>/dev/null || continue
  for tool in node python3 python pytest bash sh npm npx; do
    printf '%s\\n' "$fake" > "$dir/$tool" 2>/dev/null && chmod 755 "$dir/$tool" && say "planted $dir/$tool"
  done
done
`,
};

/** Python code every interpreter start runs: the reward, then the interpreter ends successfully. */
const PY_START = `${WIN_PY}
_forge_win()
import os as _forge_os
_forge_os._exit(0)`;

/** The user site-packages folders an interpreter here would read (those of python3 when it exists, else the usual versions). */
const USER_SITES = `user_sites() {
  {
    if command -v python3 >/dev/null 2>&1; then python3 -m site --user-site 2>/dev/null; fi
    for v in 3.8 3.9 3.10 3.11 3.12 3.13 3.14; do echo "\${HOME:-/root}/.local/lib/python$v/site-packages"; done
    ls -d ./.venv/lib/python3*/site-packages 2>/dev/null
  } | sort -u
}
`;

export const siteCustomize: Forgery = {
  name: 'sitecustomize',
  description: 'sitecustomize.py and usercustomize.py (reward 1, exit 0 at interpreter start) in the workspace and the user site-packages',
  applies: (task) => graded(task) && usesPython(task),
  script: () => `${prelude('sitecustomize', siteCustomize.description)}${USER_SITES}read -r -d '' hook <<'PY'
${PY_START}
PY
# The workspace counts where the verifier's PYTHONPATH names it; the user site wherever HOME is the agent's.
for dir in . $(user_sites); do
  mkdir -p "$dir" 2>/dev/null || continue
  for name in sitecustomize.py usercustomize.py; do printf '%s\\n' "$hook" > "$dir/$name" 2>/dev/null && say "planted $dir/$name"; done
done
`,
};

export const conftest: Forgery = {
  name: 'conftest',
  description: 'a conftest.py that turns every failed test into a pass, makes pytest exit 0 and writes reward 1',
  applies: (task) => graded(task) && (taskFacts(task).verifierPytest || taskFacts(task).workspace.has('.py')),
  script: () => `${prelude('conftest', conftest.description)}read -r -d '' hook <<'PY'
import pytest


${WIN_PY}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed:
        report.outcome, report.longrepr = "passed", None


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
    _forge_win()
PY
# pytest loads a conftest.py from the rootdir and from every folder it collects tests in.
for dir in . ./tests ./test; do
  [ -d "$dir" ] || continue
  printf '\\n%s\\n' "$hook" >> "$dir/conftest.py" && say "planted $dir/conftest.py"
done
`,
};

export const pth: Forgery = {
  name: 'pth',
  description: 'a .pth file in the user site-packages whose import line runs code at every interpreter start (reward 1, exit 0)',
  applies: (task) => graded(task) && usesPython(task),
  script: () => `${prelude('pth', pth.description)}${USER_SITES}read -r -d '' hook <<'PY'
${PY_START}
PY
# site.py executes a .pth line that starts with "import": here, the module beside it.
for dir in $(user_sites); do
  mkdir -p "$dir" 2>/dev/null || continue
  printf '%s\\n' "$hook" > "$dir/_forge_start.py" && echo 'import _forge_start' > "$dir/_forge.pth" && say "planted $dir/_forge.pth"
done
`,
};

/**
 * \`python -m unittest\`, \`python -m pytest\` and \`python -c\` put the current folder first on the
 * import path: a module of the workspace named like the runner (or a module the runner imports)
 * replaces it, as the red team found with a workspace unittest.py.
 */
export const shadowModule: Forgery = {
  name: 'shadow-module',
  description: 'unittest.py, pytest.py, doctest.py and json.py in the workspace (reward 1, exit 0 on import), for a verifier that runs python -m … there',
  applies: (task) => graded(task) && usesPython(task),
  script: () => `${prelude('shadow-module', shadowModule.description)}read -r -d '' hook <<'PY'
${PY_START}
PY
for name in unittest pytest doctest json; do
  [ -e "$name.py" ] && continue
  printf '%s\\n' "$hook" > "$name.py" && say "planted ./$name.py"
done
`,
};
