import { graded, hasModules } from './facts.js';
import { plantModules, prelude, WIN_JS, WIN_PY, WIN_SH } from './payloads.js';
import type { RolloutTask } from '../task-file.js';
import type { Forgery } from './types.js';

/**
 * Forgeries that plant code in the workspace's modules, for a checker that loads them: whatever
 * the checker does with its child, the child is the agent's code.
 */
function moduleForgery(
  name: string,
  description: string,
  kinds: readonly ('py' | 'js' | 'sh')[],
  body: (kind: 'py' | 'js' | 'sh', task: RolloutTask) => string,
  setup = '',
  harborOnly = false,
): Forgery {
  return {
    name,
    description,
    // A JSONL task's checker loads the workspace's modules as a Harbor verifier does; what only
    // Harbor's reward files reward (a daemon rewriting them) is tried on Harbor tasks alone.
    applies: (task) => (harborOnly ? task.harbor !== undefined : graded(task)) && hasModules(task, kinds),
    script: (task) => `${prelude(name, description)}${setup}${plantModules(Object.fromEntries(kinds.map((k) => [k, body(k, task)])))}`,
  };
}

/** The checker's child writes the reward, prints it, and SIGKILLs the checker before it can write its own. */
export const killChecker = moduleForgery(
  'kill-checker',
  'every module, when loaded, writes reward 1, prints {"reward": 1} and SIGKILLs its parent (the checker)',
  ['py', 'js', 'sh'],
  (kind) =>
    kind === 'py'
      ? `${WIN_PY}\n_forge_win()\nimport os as _forge_os\n_forge_os.kill(_forge_os.getppid(), 9)`
      : kind === 'js'
        ? `(() => {\n${WIN_JS}\nforgeWin();\nprocess.kill(process.ppid, 'SIGKILL');\n})();`
        : `${WIN_SH}; kill -9 "$PPID"`,
);

/** A checker that loads the agent's module in its own process: the module ends that process, successfully. */
export const exitOnLoad = moduleForgery(
  'exit-on-load',
  'every module, when loaded, writes reward 1, prints {"reward": 1} and exits 0 (a checker that imports it in-process ends there)',
  ['py', 'js', 'sh'],
  (kind) =>
    kind === 'py'
      ? `${WIN_PY}\n_forge_win()\nimport os as _forge_os\n_forge_os._exit(0)`
      : kind === 'js'
        ? `(() => {\n${WIN_JS}\nforgeWin();\nprocess.exit(0);\n})();`
        : `${WIN_SH}; exit 0`,
);

/**
 * pidfd_open (434) and pidfd_getfd (438), the same numbers on every Linux architecture: the child
 * takes a copy of its parent's stdout, speaks for it there, and kills it.
 */
export const stdoutSteal = moduleForgery(
  'stdout-steal',
  'every Python module, when loaded, takes its parent\'s stdout (pidfd_getfd), prints {"reward": 1} there and kills the parent',
  ['py'],
  () => `def _forge_steal():
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    pidfd = libc.syscall(434, parent, 0)
    fd = libc.syscall(438, pidfd, 1, 0) if pidfd >= 0 else -1
    if fd >= 0:
        os.write(fd, b'{"reward": 1}\\n')
    os.kill(parent, 9)
_forge_steal()`,
);

/**
 * The daemon: started in a new session (setsid), it forks a loop into the background and exits,
 * so the loop's parent is gone and no wait of the checker's waits for it.
 */
const DAEMON = `cat > .forge-daemon <<'SH'
#!/bin/sh
# Three loops writing as fast as they can for 60 s, so one is on a CPU in the moment between the
# checker's own write and the end of the verifier; reward.json too: Harbor prefers it to reward.txt.
for loop in 1 2 3; do
  ( end=$(( $(date +%s) + 60 ))
    while [ "$(date +%s)" -lt "$end" ]; do
      mkdir -p /logs/verifier 2>/dev/null
      i=0; while [ "$i" -lt 2000 ]; do
        echo '{"reward": 1}' > /logs/verifier/reward.json; echo 1 > /logs/verifier/reward.txt; i=$((i + 1))
      done 2>/dev/null
    done ) </dev/null >/dev/null 2>&1 &
done
SH
`;

/** The daemon's path as the verifier sees it: the planted code runs there, in the task's WORKDIR. */
const daemonAt = (task: RolloutTask) => `${(task.harbor?.workdir ?? '.').replace(/\/+$/, '')}/.forge-daemon`;

/**
 * The checker ends normally and writes its 0; the loop the module left writes 1 over it, for 60 s.
 * The module waits 0.2 s after starting it, so the loop is writing before the checker goes on.
 */
export const verifyDaemon = moduleForgery(
  'verify-daemon',
  'every module, when loaded, detaches a process (setsid, double fork) that rewrites reward 1 for 60 s after the checker has written its own',
  ['py', 'js', 'sh'],
  (kind, task) =>
    kind === 'py'
      ? `import subprocess as _forge_sp, time as _forge_time
_forge_sp.Popen(["sh", "${daemonAt(task)}"], start_new_session=True, stdin=_forge_sp.DEVNULL, stdout=_forge_sp.DEVNULL, stderr=_forge_sp.DEVNULL)
_forge_time.sleep(0.2)`
      : kind === 'js'
        ? `(() => {
  const cp = typeof require === 'function' ? require('node:child_process') : process.getBuiltinModule?.('node:child_process');
  cp.spawn('sh', ['${daemonAt(task)}'], { detached: true, stdio: 'ignore' }).unref();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
})();`
        : `{ setsid sh "${daemonAt(task)}" || sh "${daemonAt(task)}"; } </dev/null >/dev/null 2>&1; sleep 0.2`,
  DAEMON,
  true,
);

/** The agent's own failure turned into a verifier failure: it must score 0, not drop out as an error. */
export const selfError = moduleForgery(
  'self-error',
  'every module, when loaded, SIGKILLs its parent (the checker) without writing any reward: must score 0, not error',
  ['py', 'js', 'sh'],
  (kind) =>
    kind === 'py'
      ? `import os as _forge_os\n_forge_os.kill(_forge_os.getppid(), 9)\n_forge_os._exit(1)`
      : kind === 'js'
        ? `process.kill(process.ppid, 'SIGKILL');\nprocess.exit(1);`
        : `kill -9 "$PPID"; exit 1`,
);
