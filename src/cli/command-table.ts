import type { Command } from 'commander';

export type Register = (program: Command) => void;

export interface CommandEntry {
  name: string;
  /** What `polar --help` shows for it: the name, `[options]` and its arguments, as commander writes them. */
  term: string;
  description: string;
  /** Imports the command's module (and through it everything the command uses). */
  load: () => Promise<Register>;
}

/**
 * The commands, in help order. Terms and descriptions are copied here so that `polar --help` and
 * `polar --version` need no command module (a command's module pulls in ink, execa, tokenizers or
 * the store); command-table.test.ts checks them against the modules.
 */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'demo',
    term: 'demo [options]',
    description: 'see polar work end to end, no GPU: a real harness runs a small task against the mock server, and polar shows what it captured',
    load: async () => (await import('./commands/demo.js')).registerDemo,
  },
  {
    name: 'run',
    term: 'run [options] [harnessArgs...]',
    description: 'run a coding-agent harness with its model calls redirected through polar and recorded',
    load: async () => (await import('./commands/run.js')).registerRun,
  },
  {
    name: 'rollout',
    term: 'rollout [options]',
    description: 'run tasks × N samples through a harness as rewarded GRPO groups (or resume one); `rollout show ID` for its groups',
    load: async () => (await import('./commands/rollout/index.js')).registerRollout,
  },
  {
    name: 'rollouts',
    term: 'rollouts [options]',
    description: 'list rollouts with their progress, mean reward and accepted samples',
    load: async () => (await import('./commands/rollout/index.js')).registerRollout,
  },
  {
    name: 'tasks',
    term: 'tasks',
    description: 'task suites (Harbor task folders, JSONL task files): validate them before spending GPU hours',
    load: async () => (await import('./commands/tasks.js')).registerTasks,
  },
  {
    name: 'proxy',
    term: 'proxy [options]',
    description: 'serve the capture proxy: harnesses call it, it forwards to the inference server and records every call',
    load: async () => (await import('./commands/proxy.js')).registerProxy,
  },
  {
    name: 'mock-server',
    term: 'mock-server [options]',
    description: 'serve a scripted stand-in for a vLLM server (real Qwen3 tokenizer, no GPU): for trying polar and testing harnesses',
    load: async () => (await import('./commands/mock-server.js')).registerMockServer,
  },
  {
    name: 'sessions',
    term: 'sessions [options]',
    description: 'list recorded sessions with their call and token counts',
    load: async () => (await import('./commands/sessions.js')).registerSessions,
  },
  {
    name: 'audit',
    term: 'audit [options]',
    description: "list calls a proxy with session keys refused (no key, a guessed one, another session's): they are in no session",
    load: async () => (await import('./commands/audit.js')).registerAudit,
  },
  {
    name: 'show',
    term: 'show [options] [session]',
    description:
      "one session's calls in order, grouped by the agent (sub-agent) that made them; on a terminal, a browser down to each call's tokens and the merged traces",
    load: async () => (await import('./commands/show.js')).registerShow,
  },
  {
    name: 'reconstruct',
    term: 'reconstruct [options]',
    description: 'turn recorded sessions into trajectories (JSONL, one trace per line) for trainers',
    load: async () => (await import('./commands/reconstruct.js')).registerReconstruct,
  },
  {
    name: 'verify-faithfulness',
    term: 'verify-faithfulness [options]',
    description: 'prove every trainable token is exactly a sampled token: exits 0 only when every check holds',
    load: async () => (await import('./commands/verify.js')).registerVerify,
  },
  {
    name: 'export',
    term: 'export [options]',
    description: 'write training data as JSONL: token trajectories for RL trainers, or chat examples for SFT',
    load: async () => (await import('./commands/export.js')).registerExport,
  },
  {
    name: 'gym-agent',
    term: 'gym-agent [options]',
    description:
      "serve NeMo Gym's agent contract for NeMo-RL: each POST /run row runs one harness session through polar and answers with token fields and the reward",
    load: async () => (await import('./commands/gym-agent.js')).registerGymAgent,
  },
  {
    name: 'serve',
    term: 'serve [options]',
    description:
      "the rollout service NVIDIA Polar's trainer bridges call (Slime, Miles): POST /rollout/task/submit a TaskRequest, GET /rollout/task/{id} its TaskStatus, the TaskResult POSTed to its callback_url",
    load: async () => (await import('./commands/serve.js')).registerServe,
  },
  {
    name: 'train',
    term: 'train',
    description: 'train with NeMo-RL on a local NVIDIA GPU: GRPO with polar as the NeMo Gym agent, or SFT from accepted rollouts',
    load: async () => (await import('./commands/train.js')).registerTrain,
  },
  {
    name: 'replay',
    term: 'replay [options] <session>',
    description: 'replay a recorded session with no model (a cassette upstream), or re-score its tokens on another server',
    load: async () => (await import('./commands/replay.js')).registerReplay,
  },
  {
    name: 'report',
    term: 'report [options] [session]',
    description: 'write a session, or every session of a rollout, as one self-contained HTML file to open in a browser',
    load: async () => (await import('./commands/report.js')).registerReport,
  },
  {
    name: 'db',
    term: 'db',
    description: 'manage a database: migrate a shared PostgreSQL store, copy local captures into it',
    load: async () => (await import('./commands/db.js')).registerDb,
  },
  {
    name: 'worker',
    term: 'worker [options]',
    description: 'take samples of queued rollouts (polar rollout --queue) and run them on this machine, recording into the shared store',
    load: async () => (await import('./commands/worker.js')).registerWorker,
  },
];
