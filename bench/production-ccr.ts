/**
 * claude-code-router (@musistudio/claude-code-router 1.0.73, a devDependency) as the production
 * bench's third proxy: `ccr start` runs its fastify server in the foreground of one node process,
 * configured by ~/.claude-code-router/config.json. HOME is a temporary folder, so nothing reads or
 * touches the user's own config, and its logging is off (`LOG: false`): measured at its leanest.
 *
 * What it serves (read from its dist/cli.js and the bundled @musistudio/llms server):
 * - `POST /v1/messages`: Claude Code's Anthropic Messages, routed by `Router.default`
 *   ("provider,model"), converted to OpenAI Chat for the provider's `api_base_url`, the reply
 *   converted back (streaming too);
 * - `POST /v1/chat/completions`: OpenAI Chat passed to the provider named in the body's `model`
 *   ("provider,model"; the router only rewrites /v1/messages), the reply sent back as it came.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ROOT } from './paths.js';

export const CCR_PACKAGE = '@musistudio/claude-code-router';
export const CCR_PROVIDER = 'vllm';
/** The model name an OpenAI Chat client sends through it: the provider, a comma, the provider's model. */
export const CCR_CHAT_MODEL = `${CCR_PROVIDER},Qwen/Qwen3-8B`;

export function ccrVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', CCR_PACKAGE, 'package.json'), 'utf8')) as { version: string }).version;
}

export function ccrConfig(upstream: string, port: number): Record<string, unknown> {
  return {
    LOG: false,
    HOST: '127.0.0.1',
    PORT: port,
    NON_INTERACTIVE_MODE: true,
    API_TIMEOUT_MS: 600_000,
    Providers: [{ name: CCR_PROVIDER, api_base_url: `${upstream}/v1/chat/completions`, api_key: 'bench', models: ['Qwen/Qwen3-8B'] }],
    Router: { default: CCR_CHAT_MODEL },
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts `ccr start` with its own HOME under `dir`; resolves once its /health answers. */
export async function startCcr(upstream: string, dir: string): Promise<{ child: ChildProcess; url: string; config: Record<string, unknown> }> {
  const home = path.join(dir, 'ccr-home');
  fs.mkdirSync(path.join(home, '.claude-code-router'), { recursive: true });
  const port = await freePort();
  const config = ccrConfig(upstream, port);
  fs.writeFileSync(path.join(home, '.claude-code-router', 'config.json'), JSON.stringify(config, null, 2));
  const cli = path.join(ROOT, 'node_modules', CCR_PACKAGE, 'dist/cli.js');
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run npm ci (claude-code-router is a devDependency)`);
  const child = spawn(process.execPath, [cli, 'start'], {
    cwd: home,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, HOME: home, USERPROFILE: home, SERVICE_PORT: String(port) },
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`ccr start exited ${code} before it listened`))));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await Promise.race([
      fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      ),
      exited,
    ]);
    if (up) return { child, url, config };
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`ccr start did not answer ${url}/health within 60 s`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
