/** `1 session`, `2 sessions`, `0 sessions`: a count with its noun, for what the CLI prints. */
export function count(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}
