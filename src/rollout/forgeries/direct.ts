import { graded, taskFacts } from './facts.js';
import { prelude } from './payloads.js';
import type { Forgery } from './types.js';

/** The reward files themselves: a verifier that reads a /logs/verifier it did not empty, or that is never run, pays. */
export const rewardFile: Forgery = {
  name: 'reward-file',
  description: 'writes /logs/verifier/reward.txt and reward.json = 1 directly',
  applies: (task) => task.harbor !== undefined,
  script: () => `${prelude('reward-file', rewardFile.description)}win
say "wrote /logs/verifier/reward.txt and reward.json"
`,
};

/**
 * The task's own tests, rewritten to pass: a verifier that runs the workspace's copy (the prompt's
 * "do not change test.js" is no wall) pays. SWE-bench resets them before grading.
 */
export const editTests: Forgery = {
  name: 'edit-tests',
  description: 'rewrites the test files the workspace holds (test.js, test_*.py, *_test.py, tests/…) to pass',
  applies: (task) => graded(task) && taskFacts(task).testFiles,
  script:
    () => `${prelude('edit-tests', editTests.description)}workspace_files -path '*/test/*' -o -path '*/tests/*' -o -path '*/spec/*' -o -path '*/__tests__/*' \\
  -o -name 'test.js' -o -name '*.test.js' -o -name '*.spec.js' -o -name 'test.py' -o -name 'test_*.py' -o -name '*_test.py' -o -name 'test.sh' |
while IFS= read -r f; do
  case "$f" in
    *.py) printf 'def test_passes():\\n    pass\\n' > "$f" ;;         # pytest finds one passing test; run as a script, it exits 0
    *.js | *.cjs | *.mjs) printf 'process.exit(0);\\n' > "$f" ;;
    *.sh) printf '#!/bin/sh\\nexit 0\\n' > "$f" ;;
    *) continue ;;
  esac
  say "rewrote $f"
done
`,
};
