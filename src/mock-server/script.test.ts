import { describe, expect, it } from 'vitest';
import { demoScript, findShellTool, stepsDone } from './script.js';

const fn = (name: string, properties: Record<string, unknown>, required: string[] = Object.keys(properties)) => ({
  type: 'function',
  function: { name, parameters: { type: 'object', properties, required } },
});

describe('the mock server script', () => {
  it("finds each harness's shell tool and fills its schema", () => {
    expect(findShellTool([fn('Read', { file: { type: 'string' } }), fn('Bash', { command: { type: 'string' } })])!.args('ls')).toEqual({ command: 'ls' });
    expect(findShellTool([fn('exec_command', { cmd: { type: 'string' } })])!.args('ls')).toEqual({ cmd: 'ls' });
    expect(findShellTool([fn('run_shell_command', { command: { type: 'string' } })])!.name).toBe('run_shell_command');
    expect(findShellTool([fn('bash', { command: { type: 'string' }, description: { type: 'string' } })])!.args('ls')).toEqual({
      command: 'ls',
      description: 'polar demo step',
    });
    expect(findShellTool([fn('local_shell', { command: { type: 'array' } })])!.args('ls')).toEqual({ command: ['bash', '-lc', 'ls'] });
    expect(findShellTool([fn('read_file', { path: { type: 'string' } })])).toBeNull();
  });

  it('counts steps across tool results, also when a harness adds text to the tool-result turn', () => {
    const task = { role: 'user', content: 'do it' };
    const call = { role: 'assistant', content: '', tool_calls: [{}] };
    expect(stepsDone([task])).toBe(0);
    expect(stepsDone([task, call, { role: 'tool' }])).toBe(1);
    expect(stepsDone([task, call, { role: 'tool' }, { role: 'user', content: '<system-reminder>x</system-reminder>' }, call, { role: 'tool' }])).toBe(2);
    expect(stepsDone([task, call, { role: 'tool' }, { role: 'assistant', content: 'done' }, { role: 'user', content: 'again' }])).toBe(0);
  });

  it('lists, writes, then answers', () => {
    const tools = [fn('Bash', { command: { type: 'string' } })];
    const task = { role: 'user', content: 'go' };
    const call = { role: 'assistant', content: '', tool_calls: [{}] };
    expect(demoScript({ messages: [task], tools }).toolCalls![0]!.arguments).toEqual({ command: 'ls -la' });
    expect(demoScript({ messages: [task, call, { role: 'tool' }], tools }).toolCalls![0]!.arguments.command).toContain('polar-demo.txt');
    expect(demoScript({ messages: [task, call, { role: 'tool' }, call, { role: 'tool' }], tools })).toMatchObject({ content: expect.stringContaining('Done') });
    expect(demoScript({ messages: [task], tools: [] }).toolCalls).toBeUndefined();
  });
});
