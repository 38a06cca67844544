import { PolarError } from '../core/errors.js';

/** What `--accept` tests a finished sample on. */
export interface AcceptFacts {
  reward: number | null;
  status: string;
}

type Op = '>=' | '>' | '<=' | '<' | '==' | '!=';
const CLAUSE = /^\s*(reward|status)\s*(>=|<=|==|!=|>|<)\s*([A-Za-z_][\w-]*|-?\d+(?:\.\d+)?(?:e-?\d+)?)\s*$/i;

/**
 * `--accept EXPR`: which finished samples are accepted (offline SFT generation keeps only those).
 * Clauses `reward OP NUMBER` or `status ==|!= NAME`, joined by `&&`; e.g. `reward>=1`,
 * `reward > 0.5 && status == completed`. A sample without a reward is never accepted by a reward
 * clause.
 */
export function parseAccept(expr: string): (facts: AcceptFacts) => boolean {
  const clauses = expr.split('&&').map((part) => {
    const m = CLAUSE.exec(part);
    if (!m)
      throw new PolarError(
        'POLAR_USAGE',
        `--accept ${JSON.stringify(expr)}: cannot read ${JSON.stringify(part.trim())}; write e.g. 'reward>=1' or 'reward > 0.5 && status == completed'`,
      );
    const field = m[1]!.toLowerCase() as 'reward' | 'status';
    const op = m[2] as Op;
    const raw = m[3]!;
    if (field === 'reward') {
      const n = Number(raw);
      if (!Number.isFinite(n)) throw new PolarError('POLAR_USAGE', `--accept: reward is compared with a number, not ${JSON.stringify(raw)}`);
      return (f: AcceptFacts) => f.reward !== null && compare(f.reward, op, n);
    }
    if (op !== '==' && op !== '!=') throw new PolarError('POLAR_USAGE', `--accept: status is compared with == or !=, not ${op}`);
    return (f: AcceptFacts) => (op === '==' ? f.status === raw : f.status !== raw);
  });
  return (facts) => clauses.every((c) => c(facts));
}

function compare(a: number, op: Op, b: number): boolean {
  switch (op) {
    case '>=':
      return a >= b;
    case '>':
      return a > b;
    case '<=':
      return a <= b;
    case '<':
      return a < b;
    case '==':
      return a === b;
    case '!=':
      return a !== b;
  }
}
