import { StageError } from '../stage-error.js';

/**
 * task.toml env values `${VAR}` and `${VAR:-default}` come from this machine's environment when the
 * command runs (never stored with the task), as Harbor resolves them (utils/env.py:97-127); other
 * values are literal. A variable that is unset and has no default is the stage's error.
 */
export function resolveEnv(env: Record<string, string>, stage: 'run' | 'post', host: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    const m = /^\$\{([^}:]+)(?::-(.*))?\}$/s.exec(v);
    if (!m) out[k] = v;
    else if (host[m[1]!] !== undefined) out[k] = host[m[1]!]!;
    else if (m[2] !== undefined) out[k] = m[2];
    else throw new StageError(stage, `task.toml sets ${k} from $${m[1]}, which is not set in polar's environment`);
  }
  return out;
}
