/**
 * The rollout tests' agent (run with `--harness custom`, the prompt its one argument), so each
 * sample's calls and reward are known. Makes `calls` model calls through polar, then does what the
 * prompt says: write:F:TEXT, sleep:S, touch:PATH, say:TEXT (to stderr, _ for spaces), fail.
 */
export const ROLLOUT_AGENT = `
import fs from 'node:fs';
const prompt = process.argv[2] ?? '';
const calls = Number(/calls=(\\d+)/.exec(prompt)?.[1] ?? 1);
for (let i = 0; i < calls; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: prompt + ' #' + i }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }),
  });
  if (!res.ok) process.exit(3);
  await res.json();
}
for (const step of prompt.split(' ')) {
  const [verb, a, b] = step.split(':');
  if (verb === 'write') fs.writeFileSync(a, b + '\\n');
  if (verb === 'sleep') await new Promise((r) => setTimeout(r, Number(a) * 1000));
  if (verb === 'touch') fs.writeFileSync(a, 'escaped\\n');
  if (verb === 'say') console.error(step.slice(4).replaceAll('_', ' '));
  if (verb === 'fail') process.exit(1);
}
`;
