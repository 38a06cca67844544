import fs from 'node:fs';
import path from 'node:path';
import type { Yaml } from '../yaml.js';
import { checkCheckout, describeReport } from './check-checkout.js';
import { loadContract, type RunKind } from './contract.js';

/**
 * Preflight's part of the pinned list: the checkout given with --nemo-rl read against it, before
 * anything starts. The whole report goes to <run dir>/nemo-rl-check.json; keys the merged config
 * lacks become errors (NeMo-RL would crash on them in setup()), drift from the pin a warning.
 * A missing checkout is preflight's own error already, so nothing is checked then.
 */
export function contractChecks(nemoRl: string, kind: RunKind, config: Yaml, runDir: string, out: { errors: string[]; warnings: string[] }): void {
  const checkout = path.resolve(nemoRl);
  if (!fs.existsSync(checkout)) return;
  const report = checkCheckout(checkout, kind, config, loadContract());
  const file = path.join(runDir, 'nemo-rl-check.json');
  fs.writeFileSync(file, `${JSON.stringify(report, null, 1)}\n`);
  const { errors, warnings } = describeReport(report, checkout, file);
  out.errors.push(...errors);
  out.warnings.push(...warnings);
}
