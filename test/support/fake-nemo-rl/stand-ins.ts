import fs from 'node:fs';
import path from 'node:path';

const LAUNCHER = path.resolve(__dirname, 'launcher.mjs');

/**
 * A folder to put first on PATH in place of a GPU box's tools: `uv run python <script> …` starts the
 * stand-in launcher (launcher.mjs) instead of NeMo-RL, and `nvidia-smi` reports one H100 with 2 GiB in
 * use. Returns the folder.
 */
export function writeGpuStandIns(dir: string): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(
    path.join(bin, 'uv'),
    `#!/bin/sh\ncase "$1" in\n  --version) echo "uv 0.9.9 (stand-in)" ;;\n  python) echo /usr/bin/python3 ;;\n  run) shift; [ "$1" = python ] && shift; exec "${process.execPath}" "${LAUNCHER}" "$@" ;;\n  *) exit 2 ;;\nesac\n`,
    { mode: 0o755 },
  );
  fs.writeFileSync(path.join(bin, 'nvidia-smi'), `#!/bin/sh\ncase "$*" in *memory.used*) echo 2048 ;; *) echo "NVIDIA H100 80GB HBM3, 81559 MiB" ;; esac\n`, {
    mode: 0o755,
  });
  return bin;
}
