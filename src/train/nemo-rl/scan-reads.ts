/**
 * Config reads in a NeMo-RL source file, found by their shape (pure): a subscript chain with string
 * keys, `x["a"]["b"]`, on a name that holds the run's config or one of its sections, the names
 * scripts/nemo-rl-contract/extract.py knows (`master_config`, `policy_config`, `data_config`, the
 * entry scripts' `config`, the workers' `self.cfg`, …). pydantic attributes may sit in between
 * (`config.policy["generation"]`); a `.get("k")` is guarded and not a read that can crash. It is a
 * text scan, not extract.py's walk of the syntax tree: it exists to notice a read that is new in a
 * checkout, so that a person reads it, not to replace the pinned list.
 */
export interface ScannedRead {
  key: string;
  line: number;
}

/** Names that hold a config section, as its key path (extract.py's NAMES, and its `config` and `self.cfg` seeds). */
const ROOTS: Record<string, string[]> = {
  master_config: [],
  policy_config: ['policy'],
  generation_config: ['policy', 'generation'],
  data_config: ['data'],
  cluster_config: ['cluster'],
  logger_config: ['logger'],
  checkpointing_config: ['checkpointing'],
  loss_config: ['loss_fn'],
  env_configs: ['env'],
  grpo_config: ['grpo'],
  sft_config: ['sft'],
  vllm_cfg: ['policy', 'generation', 'vllm_cfg'],
};

/** `self.cfg`, per file: the generation section in the vLLM workers, the policy section in the policy workers (extract.py's seeds). */
function selfCfg(file: string): string[] | null {
  if (file.startsWith('nemo_rl/models/generation/vllm/')) return ['policy', 'generation'];
  if (file.startsWith('nemo_rl/models/policy/workers/')) return ['policy'];
  return null;
}

const CHAIN = /(?<![\w.])(self\.cfg|[A-Za-z_]\w*)((?:\s*(?:\.[A-Za-z_]\w*|\[\s*["'][^"'\n]+["']\s*\]))+)/g;
const SEGMENT = /\.([A-Za-z_]\w*)|\[\s*["']([^"'\n]+)["']\s*\]/g;

export function scanConfigReads(file: string, text: string): ScannedRead[] {
  // Black splits a long subscript over lines (`x[\n    "key"\n]`): join those back first, keeping
  // each read on the line its key sits on (as extract.py records it).
  const lines = text.split('\n');
  const joined: { text: string; lineOf: number[] }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const key = lines[i + 1];
    const close = lines[i + 2];
    if (/\[\s*$/.test(line) && key !== undefined && /^\s*["'][^"']+["']\s*(#.*)?$/.test(key) && close !== undefined && /^\s*\]/.test(close)) {
      joined.push({ text: `${line.replace(/\s*$/, '')}${key.replace(/#.*$/, '').trim()}${close.trim()}`, lineOf: [i + 2] });
      i += 2;
    } else joined.push({ text: line, lineOf: [i + 1] });
  }
  const out: ScannedRead[] = [];
  const entry = file.startsWith('examples/');
  // Docstrings name reads in prose (`env_configs["nemo_gym"]["num_gpu_nodes"]`): only code counts.
  const TRIPLE = /"""|'''/;
  let inDocstring = false;
  for (const { text: line, lineOf } of joined) {
    const parts = line.split(TRIPLE);
    const wasIn = inDocstring;
    if ((parts.length - 1) % 2 === 1) inDocstring = !inDocstring;
    if (wasIn) continue;
    const code = parts[0]!.replace(/#.*$/, '');
    for (const m of code.matchAll(CHAIN)) {
      const name = m[1]!;
      const base = name === 'self.cfg' ? selfCfg(file) : name === 'config' && entry ? [] : ROOTS[name];
      if (!base) continue;
      // An assignment target (`cfg["k"] = v`) writes, it does not read.
      const after = code.slice((m.index ?? 0) + m[0].length);
      if (/^\s*=(?!=)/.test(after)) continue;
      const segments = [...m[2]!.matchAll(SEGMENT)].map((s) => ({ attr: s[1], key: s[2] }));
      // Only a chain that ends in a subscript reads a dict key (attributes are pydantic, filled by the model).
      const lastKey = segments.findLastIndex((s) => s.key !== undefined);
      if (lastKey < 0) continue;
      // `.get(` right after the chain: the last attribute is `get`, not a section.
      const kept = segments.slice(0, lastKey + 1);
      if (kept.some((s) => s.attr === 'get' || s.attr === 'items' || s.attr === 'keys')) continue;
      out.push({ key: [...base, ...kept.map((s) => s.attr ?? s.key!)].join('.'), line: lineOf[0]! });
    }
  }
  return out;
}
