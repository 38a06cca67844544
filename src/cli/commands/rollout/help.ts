import { EXIT_ALL_ERRORED } from './summary.js';

// What `polar rollout --help` says after its options: the task file, Harbor tasks, the sandbox, stages, exit status.

export const ROLLOUT_HELP = `
Task file: JSONL, one task per line:
  {"id", "prompt", "workspace": {"dir": PATH} | {"git": URL_OR_PATH, "commit": SHA} | {"empty": true},
   "setup": [commands], "evaluator": {"type": "command", "command", "timeout"}
   | {"type": "tests", "fail_to_pass": [...], "pass_to_pass": [...]} | {"type": "session-completed"},
   "timeout": SECONDS, "metadata": {...}, "network": "host", "setup_network": "host" | "none"}
Harbor tasks: --tasks a task folder (instruction.md, task.toml, environment/, tests/, solution/) or
a folder of them (a task that does not load is skipped with a notice giving its reasons; refused
only when none loads; polar tasks check gives each task its verdict). On the host environment the workspace is the Dockerfile's COPY'd files at its
WORKDIR (/app) with /logs beside it; RUN steps and the base image are not reproduced (listed once per
task); tests/ appears at /tests only for the verifier, after the agent; reward.txt / reward.json give
the reward (every metric kept): the metric --reward-key names, else "reward", else the only one
(several and none named: 0, with the reason; polar tasks check says so). --harness oracle / nop run solution/solve.sh / nothing, no model.
--environment docker|podman (the default where \`<engine> info\` works): environment/ is built once per content
(polar-harbor/<task>:<hash>), each sample runs in its own container of it (the harness's Node and
CLI mounted read-only, the proxy through a bridge, --network none unless task.toml allows the
internet, the --max-* caps as the engine's), tests/ copied in after the agent; no diff is recorded.
Sandbox (bwrap, the default where installed): each command sees the system's toolchains read-only,
its workspace and a private home writable, and nothing else (not the task file's folder, the
database, other workspaces or your home). The harness reaches only polar's proxy unless its task
says "network": "host" (or --network host); setup commands get the host network unless
"setup_network": "none"; evaluators get none, and the task file's folder ($POLAR_TASKS_DIR) read-only.
A sample over a cap (--max-procs, --max-memory, --max-file-size, --max-cpu-seconds) ends as error.
Stages: INIT (workspace + setup, under their own budget) → READY → RUNNING (the harness; --timeout
counts from its start) → POSTRUN (diff, evaluator, reward). \`rollout show\` gives each phase's time.
Exit status: 0 when the rollout completed; 1 when it did not (interrupted: --resume continues it);
${EXIT_ALL_ERRORED} when it completed but every sample ended error (nothing to learn from, and nothing for
--resume to run: fix the cause in \`rollout show ID\`'s error column and start again); 2 for a usage error.
Example:
  polar rollout --tasks fixtures/tasks/tasks.jsonl --harness claude-code --upstream http://gpu:8000 --samples 4
`;
