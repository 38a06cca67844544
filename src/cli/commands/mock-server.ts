import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { startMockServer } from '../../mock-server/server.js';
import { action } from '../output.js';

interface MockServerOptions {
  host: string;
  port: string;
  model: string;
  json?: boolean;
}

export function registerMockServer(program: Command): void {
  program
    .command('mock-server')
    .description('serve a scripted stand-in for a vLLM server (real Qwen3 tokenizer, no GPU): for trying polar and testing harnesses')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'port (0: any free port)', '8000')
    .option('--model <name>', 'model id it reports', 'polar/mock-qwen3')
    .option('--json', 'print the listening URL as one JSON line')
    .addHelpText(
      'after',
      `
It is not a model. Every reply follows one short script that any harness can carry out with its
shell tool: list the workspace, write polar-demo.txt, answer. Token ids, logprobs and the prompt
rendering are real (Qwen3's tokenizer and chat template), so everything polar records from it is
shaped exactly like a real vLLM capture.`,
    )
    .action(action(serve));
}

async function serve(opts: MockServerOptions): Promise<void> {
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new PolarError('POLAR_USAGE', `--port must be 0-65535, got ${opts.port}`, 2);
  const server = await startMockServer({ host: opts.host, port, model: opts.model, log: false });
  if (opts.json) process.stdout.write(`${JSON.stringify({ url: server.url, model: server.model })}\n`);
  else process.stdout.write(`${chalk.bold('polar mock-server')} (scripted, not a model) on ${server.url}  model ${server.model}\n  try: polar proxy --upstream ${server.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
}
