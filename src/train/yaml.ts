import { Document, parse, visit } from 'yaml';

/**
 * The YAML polar reads (NeMo-RL configs, the NEMO_GYM_CONFIG_DICT NeMo Gym hands an agent server,
 * `--config` and `--set` values) and writes (grpo.yaml, sft.yaml, the Gym agent config), through
 * the `yaml` package: a full YAML 1.2 parser with its own test suite, rather than a hand-written
 * partial one reading another program's output. What stays here is the one policy the package
 * cannot know: the files are read back by PyYAML / OmegaConf, which resolve plain scalars by YAML
 * 1.1 rules, so a string must not be written plain where 1.1 would read it as something else.
 */
export type Yaml = null | boolean | number | string | Yaml[] | { [key: string]: Yaml };

/**
 * Reads with the YAML 1.2 core schema: `yes`/`on` stay strings and `1e5` is a number, as polar
 * read them before. Warnings (an unknown tag, say) are not printed: library code stays quiet.
 * Throws the package's YAMLParseError, which names the line and column.
 */
export function parseYaml(source: string): Yaml {
  return parse(source, { logLevel: 'error' }) as Yaml;
}

/**
 * Block style, keys in insertion order, `null` for null, no line folding (a long value stays on
 * one line), no anchors for objects that appear twice. Strings that YAML 1.2 would read as
 * another type the package quotes itself; those only YAML 1.1 would (`yes`, `off`, `0123`,
 * `1:20`, `2001-12-14`) are double-quoted here, so PyYAML and OmegaConf read back the string.
 */
export function toYaml(value: Yaml): string {
  const doc = new Document(value, { aliasDuplicateObjects: false });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && !node.type && typedInYaml11(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc.toString({ lineWidth: 0 });
}

/** Whether `s`, written plain, would read back as something other than a string under YAML 1.1. */
function typedInYaml11(s: string): boolean {
  try {
    return typeof parse(s, { version: '1.1', logLevel: 'silent' }) !== 'string';
  } catch {
    return true; // an alias (`*x`) with no anchor, say: not a plain string either
  }
}
