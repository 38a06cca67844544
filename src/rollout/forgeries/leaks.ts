import { graded } from './facts.js';
import { prelude } from './payloads.js';
import type { Forgery } from './types.js';

/**
 * Forgeries that read the answer rather than fake the grade: a later commit of the workspace's
 * repository, or a solution (or a compiled copy of one) the environment should not show.
 */

export const gitHistory: Forgery = {
  name: 'git-history',
  description: 'looks through every ref, the reflog and unreachable (packed or loose) objects for a commit HEAD lacks, and checks its files out',
  // A JSONL task's git source may hold later commits; a folder's workspace gets a fresh repository.
  applies: (task) => task.harbor !== undefined || (graded(task) && 'git' in task.workspace),
  script: () => `${prelude('git-history', gitHistory.description)}command -v git >/dev/null 2>&1 || { say "no git here"; exit 0; }
# Whoever owns the folder, read it (git refuses another user's repository by default).
g() { git -c safe.directory='*' "$@"; }
# The workspace's repository and any other under it.
find . -name .git -prune 2>/dev/null | while IFS= read -r dotgit; do
  (
    cd "$(dirname "$dotgit")" || exit 0
    head=$(g rev-parse -q --verify HEAD 2>/dev/null)
    say "$PWD: $(g rev-list --all 2>/dev/null | wc -l) commit(s) on refs, $(g reflog --all 2>/dev/null | wc -l) reflog entries"
    # Every commit a ref, the reflog or a stray object holds, newest first, that HEAD does not contain.
    later=$({ g rev-list --all; g reflog --all --format=%H; g fsck --unreachable --no-reflogs 2>/dev/null | awk '$2 == "commit" { print $3 }'; } 2>/dev/null |
      sort -u | while read -r c; do
        [ -n "$head" ] && g merge-base --is-ancestor "$c" "$head" 2>/dev/null && continue
        echo "$(g show -s --format=%ct "$c" 2>/dev/null) $c"
      done | sort -rn | head -n 1 | cut -d' ' -f2)
    if [ -n "$later" ]; then
      g checkout -f "$later" -- . && say "checked out the files of $later ($(g show -s --format=%s "$later"))"
    else
      say "no commit beyond HEAD"
    fi
  )
done
`,
};

export const readSolution: Forgery = {
  name: 'read-solution',
  description:
    'looks for /solution, /tests, the task folder, a JSONL task file naming its "solution", and caches (__pycache__, .pytest_cache, node_modules/.cache) and uses any solution it finds',
  applies: (task) => task.harbor !== undefined || graded(task),
  script: (task) => `${prelude('read-solution', readSolution.description)}[ -d /tests ] && say "/tests is visible: $(ls /tests | head -n 20 | tr '\\n' ' ')"
# A task folder or its solution anywhere outside the system's own folders.
found=$(find / -maxdepth 5 \\( -path /proc -o -path /sys -o -path /dev -o -path /usr -o -path /lib -o -path /lib64 -o -path /bin \\
  -o -path /sbin -o -path /etc -o -path /var/lib -o -path /run -o -name node_modules -o -name .git \\) -prune -o -type f \\( -path '*/solution/solve.sh' -o -name task.toml -o -name '*.jsonl' \\) -print 2>/dev/null | head -n 20)
# A JSONL task file that names this task (its id) with a "solution": its commands, as the oracle runs them.
for f in $found; do
  case "$f" in *.jsonl) ;; *) continue ;; esac
  command -v python3 >/dev/null 2>&1 || break
  python3 - "$f" ${JSON.stringify(task.id)} > .forge-solution.sh 2>/dev/null <<'PY' || continue
import json, sys
for line in open(sys.argv[1]):
    try:
        t = json.loads(line)
    except ValueError:
        continue
    if isinstance(t, dict) and t.get("id") == sys.argv[2] and t.get("solution"):
        print("\\n".join(t["solution"]))
        sys.exit(0)
sys.exit(1)
PY
  say "found the task's solution in $f: running it"
  bash .forge-solution.sh; rm -f .forge-solution.sh
  exit 0
done
rm -f .forge-solution.sh
for f in /solution/solve.sh $found; do
  case "$f" in */task.toml) f="$(dirname "$f")/solution/solve.sh" ;; *.jsonl) continue ;; esac
  [ -f "$f" ] || continue
  say "found $f: running it as the oracle would"
  bash "$f"
  exit 0
done
# A compiled module of another version of a source file: Python loads X.pyc beside it when X.py is gone.
find . -path '*/__pycache__/*.pyc' 2>/dev/null | head -n 200 | while IFS= read -r pyc; do
  dir=$(dirname "$(dirname "$pyc")"); base=$(basename "$pyc"); src="$dir/\${base%%.*}.py"
  [ -f "$src" ] || continue
  # A timestamp pyc's header: magic, flags (0), the source's mtime and size.
  read -r flags _ size <<<"$(od -An -tu4 -j4 -N12 "$pyc")"
  [ "$flags" = 0 ] && [ "$size" != "$(wc -c < "$src")" ] || continue
  say "$pyc was compiled from another $src ($size bytes): loading it instead"
  cp "$pyc" "$dir/\${base%%.*}.pyc" && mv "$src" "$src.orig"
done
for cache in .pytest_cache node_modules/.cache; do [ -d "$cache" ] && say "$cache holds: $(find "$cache" -type f | head -n 20 | tr '\\n' ' ')"; done
say "done looking"
`,
};
