import { describe, expect, it } from 'vitest';
import { compareFirstPrompts, splitMessage } from '../rollout/first-prompts.js';
import { describeDifference } from './prompt-diff.js';

/** Issue 38: a split group's message names what its samples' first prompts differ in. */
describe('describeDifference', () => {
  const prompt = (line: string) => `You are an agent.\nWorking directory: /workspace\n${line}\nTools follow.`;

  it.each([
    ["Today's date is 2026-11-27.", "Today's date is 2026-11-28.", 'the date', ['2026-11-27', '2026-11-28']],
    ['<current_date>2026-11-27</current_date>', '<current_date>2026-11-28</current_date>', 'the date', ['2026-11-27', '2026-11-28']],
    ["Today's date: Thu Nov 27 2026", "Today's date: Fri Nov 28 2026", 'the date', ['Thu Nov 27 2026', 'Fri Nov 28 2026']],
    [
      "Today's date is Thursday, November 27, 2026.",
      "Today's date is Friday, November 28, 2026.",
      'the date',
      ['Thursday, November 27, 2026', 'Friday, November 28, 2026'],
    ],
    ['OS Version: Linux 6.1.0-18-amd64', 'OS Version: Linux 6.8.0-45-generic', 'the OS version', ['6.1.0-18-amd64', '6.8.0-45-generic']],
    ['<timezone>Pacific/Kiritimati</timezone>', '<timezone>UTC</timezone>', 'the time zone', ['Pacific/Kiritimati', 'UTC']],
    [
      '<location>/home/a/polar/node_modules/@google/gemini-cli/bundle/SKILL.md</location>',
      '<location>/srv/b/polar/node_modules/@google/gemini-cli/bundle/SKILL.md</location>',
      'a path',
      ['/home/a/polar/node_modules/@google/gemini-cli/bundle/SKILL.md', '/srv/b/polar/node_modules/@google/gemini-cli/bundle/SKILL.md'],
    ],
    ['Session: ses_abc', 'Session: ses_xyz', 'the text', ['ses_abc', 'ses_xyz']],
  ])('%s vs %s: %s', (a, b, field, values) => {
    const d = describeDifference(prompt(a), prompt(b))!;
    expect(d.field).toBe(field);
    expect(d.values).toEqual(values);
    expect(d.line).toBe(3);
    expect(d.summary).toBe(`${field} (sample 1 ${JSON.stringify(values[0])}, sample 2 ${JSON.stringify(values[1])}; line 3)`);
  });

  it('is null for equal texts', () => {
    expect(describeDifference('a\nb', 'a\nb')).toBeNull();
  });

  it("names the field in a split group's message when the prompts' text can be read", () => {
    const check = compareFirstPrompts([
      { ids: [1, 2, 3], text: () => prompt('OS Version: Linux 6.1.0-18-amd64') },
      { ids: [1, 2, 4], text: () => prompt('OS Version: Linux 6.8.0-45-generic') },
    ]);
    expect(check.differsAt?.in?.field).toBe('the OS version');
    expect(splitMessage('t1', check)).toMatch(
      /this task would not train\. They differ in the OS version \(sample 0 "6\.1\.0-18-amd64", sample 1 "6\.8\.0-45-generic"; line 3\): the samples ran on machines with different kernels/,
    );
    // Without text, the old advice.
    expect(splitMessage('t1', compareFirstPrompts([{ ids: [1] }, { ids: [2] }]))).toMatch(/`polar inspect` the sessions' first calls/);
  });
});
