import chalk from 'chalk';
import type { Command } from 'commander';
import { startMockServer } from '../../mock-server/server.js';
import { mockTasksFrom } from '../../mock-server/tasks.js';
import { loadTasks } from '../../rollout/load-tasks.js';
import type { PolicyShift } from '../../mock-server/policy.js';
import { integerArg, numberArg, policyShiftArg } from '../numbers.js';
import { action } from '../output.js';

interface MockServerOptions {
  host: string;
  port: number;
  model: string;
  json?: boolean;
  nemoRl?: boolean;
  nemoRlTemperature: number;
  nemoRlTopP: number;
  tasks?: string;
  seed: number;
  policyShift?: PolicyShift;
  authToken?: string;
  allowHost?: string[];
}

export function registerMockServer(program: Command): void {
  program
    .command('mock-server')
    .description('serve a scripted stand-in for a vLLM server (real Qwen3 tokenizer, no GPU): for trying polar and testing harnesses')
    .option('--host <host>', 'address to bind; non-loopback needs --auth-token', '127.0.0.1')
    .option('--auth-token <token>', 'require this token (Authorization: Bearer, as POLAR_UPSTREAM_API_KEY sends it, or x-polar-auth-token) on every request')
    .option('--allow-host <name...>', 'host names callers may reach it by, besides its address and loopback names')
    .option('--port <n>', 'port (0: any free port)', integerArg('--port', 0, 65535), 8000)
    .option('--model <name>', 'model id it reports', 'polar/mock-qwen3')
    .option('--json', 'print the listening URL as one JSON line')
    .option(
      '--tasks <path>',
      'a rollout task file or Harbor task folder(s): for tasks with metadata.mock {correct, wrong}, follow one of the two scripted solutions per session (alternating, seeded)',
    )
    .option('--seed <n>', "seeds which solution each task's first session gets", integerArg('--seed', 0), 0)
    .option(
      '--policy-shift <every:delta>',
      'score tokens as a second policy that differs by DELTA in logprob at every EVERY-th position (for trying `polar replay --rescore`)',
      policyShiftArg('--policy-shift'),
    )
    .option('--nemo-rl', "behave as NeMo-RL's vLLM HTTP server: chat and /tokenize only, fixed sampling, prefix splicing")
    .option('--nemo-rl-temperature <t>', 'the training temperature every --nemo-rl request must send', numberArg('--nemo-rl-temperature', 0, 100), 1)
    .option('--nemo-rl-top-p <p>', 'the training top_p every --nemo-rl request must send', numberArg('--nemo-rl-top-p', Number.MIN_VALUE, 1), 1)
    .addHelpText(
      'after',
      `
It is not a model. Every reply follows one short script that any harness can carry out with its
shell tool: list the workspace, write polar-demo.txt, answer. Token ids, logprobs and the prompt
rendering are real (Qwen3's tokenizer and chat template), so everything polar records from it is
shaped exactly like a real vLLM capture.

Endpoints:
  POST /v1/chat/completions   vLLM chat, with return_token_ids, logprobs, streaming
  POST /v1/completions        vLLM completions with a token-id prompt (text prompts get 400)
  POST /generate              SGLang's native generate with input_ids
  POST /tokenize              vLLM's, with messages
  GET  /v1/models             with max_model_len
The token-id endpoints read the conversation back out of the prompt ids and sample exactly what
the chat endpoint would for it: same ids, same logprobs.

With --nemo-rl it answers as NeMo-RL's server during GRPO instead: only /v1/chat/completions and
/tokenize; a request must send top_p, no top_k (or -1), and the configured temperature and top_p,
else 500; logprobs put prompt_token_ids, generation_token_ids and generation_log_probs on the
message; a message carrying prompt_token_ids + generation_token_ids (or a top-level
required_prefix_token_ids) has its exact tokens spliced into the next prompt.`,
    )
    .action(action(serve));
}

async function serve(opts: MockServerOptions): Promise<void> {
  const { port } = opts;
  const nemoRl = opts.nemoRl ? { temperature: opts.nemoRlTemperature, topP: opts.nemoRlTopP } : undefined;
  const tasks = opts.tasks ? mockTasksFrom(loadTasks(opts.tasks, (line) => process.stderr.write(chalk.yellow(`${line}\n`)))) : [];
  const server = await startMockServer({
    host: opts.host,
    port,
    ...(opts.authToken ? { authToken: opts.authToken } : {}),
    ...(opts.allowHost ? { allowHosts: opts.allowHost } : {}),
    model: opts.model,
    log: false,
    tasks,
    seed: opts.seed,
    ...(nemoRl ? { nemoRl } : {}),
    ...(opts.policyShift ? { policyShift: opts.policyShift } : {}),
  });
  const flavor = nemoRl ? `, as NeMo-RL's server (temperature ${nemoRl.temperature}, top_p ${nemoRl.topP})` : '';
  if (opts.json) process.stdout.write(`${JSON.stringify({ url: server.url, model: server.model, ...(nemoRl ? { nemoRl } : {}) })}\n`);
  else
    process.stdout.write(
      `${chalk.bold('polar mock-server')} (scripted, not a model${flavor}) on ${server.url}  model ${server.model}\n  try: polar proxy --upstream ${server.url}\n`,
    );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
}
