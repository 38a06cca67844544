/**
 * The bash every forgery starts with, and the code it plants: the same few lines that write a reward
 * of 1 where Harbor reads it (/logs/verifier/reward.txt and reward.json) and print `{"reward": 1}`
 * (what a `command` checker's last line would say), in each language a checker may load.
 */
export function prelude(name: string, description: string): string {
  return `#!/usr/bin/env bash
# forge:${name}: ${description}
# Run in the agent's place, in its workspace (the task's WORKDIR), with no network.
set -u
say() { printf 'forge:${name}: %s\\n' "$*"; }
# The workspace's own files (not its .git or dependencies), at most 200: find's tests follow.
workspace_files() {
  find . \\( -name .git -o -name node_modules -o -name .venv -o -name __pycache__ \\) -prune -o -type f \\( "$@" \\) -print 2>/dev/null | head -n 200
}
# A reward of 1 where Harbor's verifier leaves one.
win() {
  mkdir -p /logs/verifier 2>/dev/null
  echo 1 > /logs/verifier/reward.txt 2>/dev/null
  echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
  echo '{"reward": 1}'
}
`;
}

/** The reward, from Python (only the standard library). */
export const WIN_PY = `def _forge_win():
    import os
    try:
        os.makedirs("/logs/verifier", exist_ok=True)
        for name, text in (("reward.txt", "1\\n"), ("reward.json", '{"reward": 1}\\n')):
            with open("/logs/verifier/" + name, "w") as f:
                f.write(text)
    except OSError:
        pass
    print('{"reward": 1}', flush=True)`;

/** The reward, from JavaScript: CommonJS has require, an ES module process.getBuiltinModule (Node 20.16+). */
export const WIN_JS = `function forgeWin() {
  const fs = typeof require === 'function' ? require('node:fs') : process.getBuiltinModule?.('node:fs');
  try {
    fs.mkdirSync('/logs/verifier', { recursive: true });
    fs.writeFileSync('/logs/verifier/reward.txt', '1\\n');
    fs.writeFileSync('/logs/verifier/reward.json', '{"reward": 1}\\n');
  } catch {}
  console.log('{"reward": 1}');
}`;

/** The reward, from a shell script. */
export const WIN_SH = `mkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt 2>/dev/null; echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null; echo '{"reward": 1}'`;

/** What to plant in each kind of module; a kind left out is left alone. */
export interface Plants {
  py?: string;
  js?: string;
  sh?: string;
}

/**
 * Bash that plants code in every module of the workspace, to run whenever a checker loads it:
 * appended to .py and .js/.cjs/.mjs files (the module's own definitions run first, and a
 * \`from __future__\` import stays first), and put right after a shell script's #! line (a script
 * that exits early would never reach its end).
 */
export function plantModules(plants: Plants): string {
  const out: string[] = [];
  if (plants.py !== undefined)
    out.push(`read -r -d '' payload_py <<'PY'
${plants.py}
PY
workspace_files -name '*.py' | while IFS= read -r f; do printf '\\n%s\\n' "$payload_py" >> "$f" && say "planted in $f"; done`);
  if (plants.js !== undefined)
    out.push(`read -r -d '' payload_js <<'JS'
${plants.js}
JS
workspace_files -name '*.js' -o -name '*.cjs' -o -name '*.mjs' | while IFS= read -r f; do printf '\\n;%s\\n' "$payload_js" >> "$f" && say "planted in $f"; done`);
  if (plants.sh !== undefined)
    out.push(`read -r -d '' payload_sh <<'SH'
${plants.sh}
SH
workspace_files -name '*.sh' | while IFS= read -r f; do
  # After the #! line when there is one; cat > keeps the file's mode.
  if head -n 1 "$f" | grep -q '^#!'; then { head -n 1 "$f"; printf '%s\\n' "$payload_sh"; tail -n +2 "$f"; } > "$f.forge"
  else { printf '%s\\n' "$payload_sh"; cat "$f"; } > "$f.forge"; fi
  cat "$f.forge" > "$f" && rm -f "$f.forge" && say "planted in $f"
done`);
  return `${out.join('\n')}\n`;
}
