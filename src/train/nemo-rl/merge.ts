import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { parseYaml, type Yaml } from '../yaml.js';

/**
 * NeMo-RL's own rule for the config a run ends up with (nemo_rl/utils/config.py at 7ea279a,
 * `merge_with_override` :31-49 and `load_config_with_inheritance` :52-99), so polar can check the
 * merged result instead of only what it writes:
 * - `defaults:` (a path or a list) names parents, loaded depth-first with their own defaults; a
 *   relative path is resolved against the folder of the file that names it; later parents win.
 * - A *top-level* section of the child carrying `_override_: true` replaces the parent's section
 *   (the marker is dropped). Deeper `_override_` keys are not looked at and stay as plain keys.
 * - Everything else is OmegaConf.merge: maps merge key by key, any other value (lists, scalars,
 *   null) replaces, and a `???` (mandatory, not yet given) value keeps the parent's.
 * Interpolations (`${...}`) are left as strings: NeMo-RL resolves them later, after the merge.
 */
export type ReadConfig = (file: string) => string;

export function loadWithInheritance(file: string, read: ReadConfig): Yaml {
  const config = parseYaml(read(file));
  if (!isMap(config)) throw new PolarError('POLAR_USAGE', `${file}: a NeMo-RL config must be a mapping`);
  if (!('defaults' in config)) return config;
  const { defaults, ...own } = config;
  const parents = Array.isArray(defaults) ? defaults.map(String) : [String(defaults)];
  let base: Yaml = {};
  for (const parent of parents) {
    const parentPath = parent.startsWith('/') ? parent : path.join(path.dirname(file), parent);
    base = mergeWithOverride(base, loadWithInheritance(parentPath, read));
  }
  return mergeWithOverride(base, own);
}

export function mergeWithOverride(base: Yaml, override: Yaml): Yaml {
  if (!isMap(base) || !isMap(override)) return override;
  const kept: { [k: string]: Yaml } = { ...base };
  const child: { [k: string]: Yaml } = {};
  for (const [key, value] of Object.entries(override)) {
    if (isMap(value) && value._override_ !== undefined && value._override_ !== false && value._override_ !== null) {
      const { _override_: _marker, ...rest } = value;
      child[key] = rest;
      delete kept[key];
    } else child[key] = value;
  }
  return omegaMerge(kept, child);
}

/** OmegaConf.merge for plain values: maps merge recursively, `???` keeps the base, the rest replaces. */
export function omegaMerge(base: Yaml, override: Yaml): Yaml {
  if (override === '???' && base !== undefined) return base;
  if (!isMap(base) || !isMap(override)) return override;
  const out: { [k: string]: Yaml } = { ...base };
  for (const [key, value] of Object.entries(override)) out[key] = key in out ? omegaMerge(out[key]!, value) : value;
  return out;
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
