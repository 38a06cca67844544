import { isRecord } from '../../core/chat.js';
import { stringMap, type Report } from './toml-fields.js';
import type { HarborMcpServer, HarborTrial } from './types.js';

/**
 * What an [environment] table asks of the machine beyond a container, read as Harbor's
 * EnvironmentConfig does (models/task/config.py:324-380 at the fork snapshot 15735640198/harbor
 * f276a3b): GPUs (`gpus`, `gpu_types`), a TPU, the MCP servers the agent is given
 * ([[environment.mcp_servers]], MCPServerConfig :519-539), the environment's own variables (`env`),
 * a Windows `os` and a `skills_dir`. polar runs none of them yet: the verdict says so by name
 * (checking/as-written.ts).
 */
type Needs = Pick<HarborTrial, 'gpus' | 'gpuTypes' | 'mcpServers' | 'environmentEnv' | 'windows' | 'tpu' | 'skillsDir'>;

export function readTaskNeeds(environment: Record<string, unknown>, at: Report): Needs {
  const out: Needs = {};
  const { gpus, gpu_types: types } = environment;
  // `gpus: int | None` (config.py:341): pydantic takes a whole number, not a negative one here.
  if (gpus !== undefined) {
    if (typeof gpus !== 'number' || !Number.isInteger(gpus) || gpus < 0) at('task.toml', 'environment.gpus', 'a whole number of GPUs (config.py:341)');
    else if (gpus > 0) out.gpus = gpus;
  }
  if (types !== undefined) {
    if (!Array.isArray(types) || types.some((t) => typeof t !== 'string'))
      at('task.toml', 'environment.gpu_types', 'a list of GPU type names (config.py:342-346)');
    else out.gpuTypes = types as string[];
  }
  const servers = readMcpServers(environment.mcp_servers, at);
  if (servers.length > 0) out.mcpServers = servers;
  const env = stringMap(environment.env, 'environment.env', at);
  if (Object.keys(env).length > 0) out.environmentEnv = env;
  readPlatform(environment, out, at);
  return out;
}

/** `os` (linux or windows, any case: config.py:381-387), `tpu` (type and topology, :281-322) and `skills_dir`. */
function readPlatform(environment: Record<string, unknown>, out: Needs, at: Report): void {
  const { os, tpu, skills_dir: skills } = environment;
  if (os !== undefined) {
    const name = typeof os === 'string' ? os.toLowerCase() : null;
    if (name !== 'linux' && name !== 'windows') at('task.toml', 'environment.os', '"linux" or "windows" (TaskOS, config.py:179-183)');
    else if (name === 'windows') out.windows = true;
  }
  if (tpu !== undefined) {
    if (!isRecord(tpu) || typeof tpu.type !== 'string' || tpu.type === '' || typeof tpu.topology !== 'string' || !/^\d+x\d+(x\d+)?$/.test(tpu.topology))
      at('task.toml', 'environment.tpu', 'a table with type and topology "NxM" or "NxMxK" (TpuSpec, config.py:281-322)');
    else out.tpu = `${tpu.type} ${tpu.topology}`;
  }
  if (skills !== undefined) {
    if (typeof skills !== 'string') at('task.toml', 'environment.skills_dir', 'a path in the environment');
    else out.skillsDir = skills;
  }
}

const TRANSPORTS = new Set(['stdio', 'sse', 'streamable-http']);

/** [[environment.mcp_servers]]: each checked as MCPServerConfig's validators do (config.py:519-539). */
function readMcpServers(value: unknown, at: Report): HarborMcpServer[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    at('task.toml', 'environment.mcp_servers', 'an array of tables ([[environment.mcp_servers]] with name, transport, url or command)');
    return [];
  }
  const out: HarborMcpServer[] = [];
  value.forEach((raw, i) => {
    const field = `environment.mcp_servers[${i}]`;
    if (!isRecord(raw)) return at('task.toml', field, 'a table with name, transport, url or command');
    const bad = (key: string, what: string) => at('task.toml', `${field}.${key}`, `${what}: Harbor's own validator rejects it too (config.py:519-539)`);
    // "http" is read as "streamable-http" (normalize_transport, config.py:528-531); "sse" is the default.
    const transport = raw.transport === undefined ? 'sse' : raw.transport === 'http' ? 'streamable-http' : raw.transport;
    const args = raw.args ?? [];
    if (typeof raw.name !== 'string') return bad('name', 'a name (required)');
    if (typeof transport !== 'string' || !TRANSPORTS.has(transport)) return bad('transport', '"stdio", "sse", "streamable-http" (or "http")');
    if (transport !== 'stdio' && (typeof raw.url !== 'string' || raw.url === '')) return bad('url', `required for transport "${transport}"`);
    if (transport === 'stdio' && (typeof raw.command !== 'string' || raw.command === '')) return bad('command', 'required for transport "stdio"');
    if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) return bad('args', 'a list of strings');
    out.push({
      name: raw.name,
      transport: transport as HarborMcpServer['transport'],
      ...(typeof raw.url === 'string' ? { url: raw.url } : {}),
      ...(typeof raw.command === 'string' ? { command: raw.command } : {}),
      args: args as string[],
    });
  });
  return out;
}
