import { PolarError } from '../../../core/errors.js';

/**
 * What Harbor defines for compose's variable interpolation, besides its own process environment
 * (src/harbor/environments/docker/docker.py:394 passes os.environ, which polar does not: a variable only the host's environment
 * would give is refused by name). Infra variables (src/harbor/environments/docker/compose_env.py:11-24, src/harbor/environments/docker/docker.py:182-190,
 * 344-349): CONTEXT_DIR, MAIN_IMAGE_NAME, PREBUILT_IMAGE_NAME (prebuilt only), CPUS, MEMORY;
 * the legacy log-mount paths ENV_{AGENT_LOGS,VERIFIER_LOGS,ARTIFACTS}_PATH (src/harbor/environments/docker/compose_env.py:52-78,
 * their container side); and the task's [environment].env (src/harbor/environments/docker/docker.py:193-195, 351-357), which the
 * infra variables override (src/harbor/environments/docker/compose_env.py:27-49).
 */
export interface HarborComposeVars {
  /** The task's environment/ folder, absolute. */
  environmentDir: string;
  /** The main image polar built or uses (Harbor's `hb__<name>`, src/harbor/environments/docker/docker.py:183). */
  mainImage?: string;
  /** [environment].docker_image when the task runs it prebuilt. */
  prebuiltImage?: string;
  cpus?: number;
  memoryMb?: number;
  /** [environment].env, resolved. */
  taskEnv?: Readonly<Record<string, string>>;
}

export function harborComposeVars(v: HarborComposeVars): Record<string, string> {
  const infra: Record<string, string> = { CONTEXT_DIR: v.environmentDir };
  if (v.mainImage !== undefined) infra.MAIN_IMAGE_NAME = v.mainImage;
  if (v.prebuiltImage !== undefined) infra.PREBUILT_IMAGE_NAME = v.prebuiltImage;
  if (v.cpus !== undefined) infra.CPUS = String(v.cpus);
  if (v.memoryMb !== undefined) infra.MEMORY = `${v.memoryMb}M`;
  // Harbor's trial mounts (src/harbor/models/trial/paths.py:35-43); the HOST_* halves name host folders only
  // a task's own `volumes` would use, which polar refuses.
  infra.ENV_AGENT_LOGS_PATH = '/logs/agent';
  infra.ENV_VERIFIER_LOGS_PATH = '/logs/verifier';
  infra.ENV_ARTIFACTS_PATH = '/logs/artifacts';
  return { ...(v.taskEnv ?? {}), ...infra };
}

const NAME = /^[_a-zA-Z][_a-zA-Z0-9]*/;

/**
 * Compose-spec interpolation (compose-spec/spec.md "Interpolation") of one string: `$$` is a `$`;
 * `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `${VAR?error}`,
 * `${VAR:+alt}`, `${VAR+alt}`, nested in the default/alternative. `where` names the value for errors.
 */
export function interpolate(text: string, vars: Readonly<Record<string, string>>, where: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c !== '$') {
      out += c;
      i += 1;
      continue;
    }
    const next = text[i + 1];
    if (next === '$') {
      out += '$';
      i += 2;
    } else if (next === '{') {
      const end = closingBrace(text, i + 2, where);
      out += braced(text.slice(i + 2, end), vars, where);
      i = end + 1;
    } else {
      const m = NAME.exec(text.slice(i + 1));
      if (!m) throw refusal(where, `a \`$\` that starts no variable (write \`$$\` for a literal \`$\`): ${text}`);
      out += lookup(m[0], vars, where);
      i += 1 + m[0].length;
    }
  }
  return out;
}

function closingBrace(text: string, from: number, where: string): number {
  let depth = 1;
  for (let j = from; j < text.length; j += 1) {
    if (text[j] === '$' && text[j + 1] === '$') j += 1;
    else if (text[j] === '$' && text[j + 1] === '{') {
      depth += 1;
      j += 1;
    } else if (text[j] === '}') {
      depth -= 1;
      if (depth === 0) return j;
    }
  }
  throw refusal(where, `an unclosed \`\${\`: ${text}`);
}

function braced(inner: string, vars: Readonly<Record<string, string>>, where: string): string {
  const m = NAME.exec(inner);
  if (!m) throw refusal(where, `\`\${${inner}}\` is no variable`);
  const name = m[0];
  const rest = inner.slice(name.length);
  if (rest === '') return lookup(name, vars, where);
  const op = /^(:-|-|:\?|\?|:\+|\+)/.exec(rest)?.[0];
  if (!op) throw refusal(where, `\`\${${inner}}\`: compose knows no \`${rest}\` after a variable`);
  const arg = rest.slice(op.length);
  const value = vars[name];
  // The `:` forms treat an empty value as unset (compose-spec "Interpolation").
  const set = op.startsWith(':') ? value !== undefined && value !== '' : value !== undefined;
  if (op.endsWith('-')) return set ? (value as string) : interpolate(arg, vars, where);
  if (op.endsWith('+')) return set ? interpolate(arg, vars, where) : '';
  if (set) return value as string;
  throw refusal(where, `\${${name}} is required: ${interpolate(arg, vars, where) || `${name} is not set`}`);
}

/**
 * A variable Harbor does not define is what compose makes of one unset: empty (compose-spec
 * "Interpolation": "unset … substituted with an empty string", with a warning). Harbor passes its
 * own process environment (docker.py:394), where a Terminal-Bench task's `${TEST_DIR}` is unset;
 * polar passes none of the host's, so the same file gives the same services on every machine.
 */
function lookup(name: string, vars: Readonly<Record<string, string>>, _where: string): string {
  return vars[name] ?? '';
}

/** A refusal of the task's compose file, naming where. */
export function refusal(where: string, why: string): PolarError {
  return new PolarError('POLAR_USAGE', `docker-compose.yaml: ${where}: ${why}`);
}
