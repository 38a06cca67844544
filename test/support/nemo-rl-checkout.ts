import fs from 'node:fs';
import path from 'node:path';
import { baseKeys, loadContract, treeOfKeys, type Contract } from '../../src/train/nemo-rl/contract.js';
import { toYaml } from '../../src/train/yaml.js';

/**
 * A NeMo-RL checkout tree built from the pinned list alone, for tests (no NeMo-RL code): every file
 * the list names, each pinned line reading its key as a subscript (the rest comment lines), and the
 * base configs holding exactly the pinned key paths. What a real checkout at the pinned commit looks
 * like to `checkCheckout`; `omitKeys` drops base-config keys, `shift` pushes a file's lines down.
 */
export function writeFixtureCheckout(dir: string, opts: { omitKeys?: string[]; shift?: { file: string; by: number }; contract?: Contract } = {}): string {
  const contract = opts.contract ?? loadContract();
  const files = new Map<string, Map<number, string>>();
  for (const kind of ['grpo', 'sft'] as const) {
    const run = contract.runs[kind];
    for (const f of [run.entry, ...run.files]) if (!files.has(f)) files.set(f, new Map());
    for (const read of contract.reads[kind]) {
      const lines = files.get(read.file)!;
      // A read that is no subscript (a parameter, a `.get`) holds the text the list matches instead.
      for (const n of read.lines) lines.set(n, `${lines.get(n) ?? 'x = cfg'}${read.match ? ` # ${read.match}` : `["${read.key.split('.').at(-1)}"]`}`);
    }
  }
  for (const [file, lines] of files) {
    const by = opts.shift?.file === file ? opts.shift.by : 0;
    const last = Math.max(1, ...lines.keys());
    const text = Array.from({ length: last + by }, (_, i) => (i < by ? '# shifted' : (lines.get(i + 1 - by) ?? '#'))).join('\n');
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), `${text}\n`);
  }
  for (const kind of ['grpo', 'sft'] as const) {
    const keys = baseKeys(kind, contract).filter((k) => !(opts.omitKeys ?? []).includes(k));
    fs.mkdirSync(path.dirname(path.join(dir, contract.runs[kind].base)), { recursive: true });
    fs.writeFileSync(path.join(dir, contract.runs[kind].base), `# built from fixtures/nemo-rl/${contract.runs[kind].base_keys}\n${toYaml(treeOfKeys(keys))}`);
  }
  for (const f of contract.gym.files) {
    fs.mkdirSync(path.dirname(path.join(dir, contract.gym.root, f.path)), { recursive: true });
    fs.writeFileSync(path.join(dir, contract.gym.root, f.path), '# stand-in\n');
  }
  fs.writeFileSync(path.join(dir, '.python-version'), '3.13.14\n');
  return dir;
}
