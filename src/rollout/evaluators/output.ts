import { scrubSecrets } from '../../store/redact.js';

const OUTPUT_KEPT = 8 * 1024;

/** An evaluator's output as stored: its last 8 KiB, secrets scrubbed. */
export function keptOutput(stdout: string, stderr: string, secrets: readonly string[]): string {
  return bounded(scrubSecrets(`${stdout}${stderr ? `\n[stderr]\n${stderr}` : ''}`, secrets));
}

export function bounded(text: string): string {
  return text.length > OUTPUT_KEPT ? `…${text.slice(text.length - OUTPUT_KEPT)}` : text;
}
