import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { HttpGuard } from '../../core/http/guard.js';
import { requireDoorBeyondLoopback } from './agent.js';
import { sourceAllowList } from './allow-from.js';
import { AGENT_NAME, agentGymConfig, agentNames, gymRows, parseAgentHost } from './wiring.js';

const noLookup = async (name: string): Promise<string[]> => {
  throw new Error(`no DNS in this test (${name})`);
};

function request(remoteAddress: string, headers: Record<string, string> = {}): IncomingMessage {
  return { socket: { remoteAddress }, headers: { host: '10.0.0.1:5100', ...headers } } as unknown as IncomingMessage;
}

describe('--allow-from: the source addresses a gym-agent beyond loopback answers (NeMo Gym sends no token)', () => {
  it('admits listed addresses and subnets, IPv4-mapped peers and this machine; refuses the rest', async () => {
    const list = await sourceAllowList(['10.0.0.2', '192.168.7.0/24', '[fd00::9]'], noLookup);
    expect(list.allows('10.0.0.2')).toBe(true);
    expect(list.allows('::ffff:10.0.0.2')).toBe(true);
    expect(list.allows('192.168.7.200')).toBe(true);
    expect(list.allows('fd00::9')).toBe(true);
    expect(list.allows('127.0.0.1')).toBe(true);
    expect(list.allows('::1')).toBe(true);
    expect(list.allows('10.0.0.3')).toBe(false);
    expect(list.allows('192.168.8.1')).toBe(false);
    expect(list.allows(undefined)).toBe(false);
    expect(list.described).toBe('10.0.0.2, 192.168.7.0/24, fd00::9');
  });

  it('resolves a host name once, to all its addresses; a bad subnet or an unresolvable name is refused at start', async () => {
    const list = await sourceAllowList(['trainer'], async () => ['10.1.0.5', '10.1.0.6']);
    expect(list.allows('10.1.0.6')).toBe(true);
    expect(list.described).toBe('trainer (10.1.0.5, 10.1.0.6)');
    await expect(sourceAllowList(['10.0.0.0/33'], noLookup)).rejects.toThrow(/not a subnet/);
    await expect(sourceAllowList(['trainer'], noLookup)).rejects.toThrow(/does not resolve here/);
    await expect(sourceAllowList([' '], noLookup)).rejects.toThrow(/at least one/);
  });

  it('the guard refuses a foreign source with 403 before anything else, and with a token requires both', async () => {
    const allowFrom = await sourceAllowList(['10.0.0.2'], noLookup);
    const guard = new HttpGuard({ host: '10.0.0.1', allowFrom, what: 'polar gym-agent' });
    expect(guard.check(request('10.0.0.2'), { json: false })).toBeNull();
    expect(guard.check(request('10.0.0.3'))).toMatchObject({ status: 403, message: expect.stringContaining('a call from 10.0.0.3 is refused') });
    const both = new HttpGuard({ host: '10.0.0.1', allowFrom, token: 't', what: 'polar gym-agent' });
    expect(both.check(request('10.0.0.2'))).toMatchObject({ status: 401 });
    expect(both.check(request('10.0.0.2', { authorization: 'Bearer t' }))).toBeNull();
    expect(both.check(request('10.0.0.3', { authorization: 'Bearer t' }))).toMatchObject({ status: 403 });
  });

  it('beyond loopback with neither --allow-from nor --auth-token is refused, naming both; loopback needs neither', async () => {
    expect(() => requireDoorBeyondLoopback('0.0.0.0', null, null)).toThrow(/--allow-from ADDRESS\|SUBNET\|HOST .* or --auth-token TOKEN/);
    expect(() => new HttpGuard({ host: '0.0.0.0', what: 'polar gym-agent' })).toThrow(/--auth-token/);
    expect(() => requireDoorBeyondLoopback('127.0.0.1', null, null)).not.toThrow();
    expect(() => requireDoorBeyondLoopback('0.0.0.0', 'tok', null)).not.toThrow();
    const allowFrom = await sourceAllowList(['10.0.0.2'], noLookup);
    expect(() => requireDoorBeyondLoopback('0.0.0.0', null, allowFrom)).not.toThrow();
  });
});

describe('polar train grpo --agent-host: one Gym instance per agent, rows spread over them by task', () => {
  const remotes = [parseAgentHost('node2:5100'), parseAgentHost('[fd00::3]:5200')];

  it('writes the local agent (started by Gym) and one entry per remote agent with no entrypoint (Gym calls it, does not start it)', () => {
    expect(agentGymConfig(remotes)).toEqual({
      polar_agent: { responses_api_agents: { polar_agent: { entrypoint: 'app.py', host: '127.0.0.1' } } },
      polar_agent_remote_1: { responses_api_agents: { polar_agent: { host: 'node2', port: 5100 } } },
      polar_agent_remote_2: { responses_api_agents: { polar_agent: { host: '[fd00::3]', port: 5200 } } },
    });
    expect(Object.keys(agentGymConfig(remotes, false) as object)).toEqual(['polar_agent_remote_1', 'polar_agent_remote_2']);
    expect(agentGymConfig()).toEqual({ polar_agent: { responses_api_agents: { polar_agent: { entrypoint: 'app.py', host: '127.0.0.1' } } } });
  });

  it('addresses each task row to one agent, round robin (NeMo-RL repeats a row for its group: one agent per group)', () => {
    const tasks = ['a', 'b', 'c', 'd'].map((id) => ({ id, prompt: id }) as never);
    const names = gymRows(tasks, agentNames(remotes))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { agent_ref: { name: string } }).agent_ref.name);
    expect(names).toEqual([AGENT_NAME, 'polar_agent_remote_1', 'polar_agent_remote_2', AGENT_NAME]);
    expect(
      new Set(
        gymRows(tasks)
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { agent_ref: { name: string } }).agent_ref.name),
      ),
    ).toEqual(new Set([AGENT_NAME]));
  });

  it('takes HOST:PORT or [IPv6]:PORT and refuses anything else', () => {
    expect(parseAgentHost('10.0.0.2:5100')).toEqual({ host: '10.0.0.2', port: 5100 });
    for (const bad of ['node2', 'node2:0', 'node2:70000', 'fd00::3:5200', 'http://node2:5100']) expect(() => parseAgentHost(bad)).toThrow(/HOST:PORT/);
  });
});
