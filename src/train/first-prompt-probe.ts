import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { baseEnvironment } from '../harness/env.js';
import type { Harness } from '../harness/types.js';
import { startMockServer } from '../mock-server/server.js';
import { prepareWorkspace } from '../rollout/workspace.js';
import type { RolloutTask } from '../rollout/task-file.js';
import { rolloutInsidePaths } from '../rollout/sandboxing.js';
import { DEFAULT_LIMITS, findBwrap, fixedPlacement, type InsidePaths, type SandboxSettings } from '../sandbox/index.js';
import { runHarness } from '../session/run-harness.js';
import { Store } from '../store/store.js';
import type { ChatTemplate, TemplateMessage } from '../upstream/tito/chat-template.js';
import { firstDifference } from './prompt-diff.js';

/**
 * The harness's first model call, made twice as two samples of one task are: each in its own
 * workspace folder (prepared and committed as a rollout prepares one) with its own session and
 * private home, in the sandbox the agent will use. Measured against polar's mock server, which
 * answers every call with a final text, so each run ends after its first turn.
 *
 * Two renders that differ mean NeMo-RL would split every task's group (it groups samples by their
 * first prompt's token ids, nemo_gym.py:1012 and algorithms/utils.py:132-159 at 7ea279a): each
 * sample its own group, advantage 0, nothing learned. The difference is returned as text to show.
 */
export interface ProbeInput {
  /** The task text of the probe. */
  prompt: string;
  sandbox: 'bwrap' | 'none';
  /** The task file's folder the agent's evaluators mount: counted when the fixed paths are chosen. */
  tasksDir?: string;
  nodeBin?: string;
  timeoutSec?: number;
  onNotice?: (line: string) => void;
}

export interface ProbeResult {
  /** Tokens of the first call's prompt, rendered with `template` (generation prompt included). */
  tokens: number;
  tools: number;
  /** The same prompt as the mock server counted it (bundled Qwen3). */
  mockTokens: number | null;
  /** Where the two samples' rendered first prompts part (prompt-diff.ts), or null when identical. */
  difference: string | null;
}

/** The probe's task, as a rollout would run it: an empty workspace, no setup. */
const probeTask = (prompt: string): RolloutTask => ({
  id: 'first-prompt-probe',
  prompt,
  workspace: { empty: true },
  setup: [],
  evaluator: { type: 'command', command: 'true', timeout: 60 },
  timeout: null,
  metadata: {},
});

export async function probeFirstPrompts(harness: Harness, bin: string, template: ChatTemplate, input: ProbeInput): Promise<ProbeResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-first-prompt-'));
  // Every call gets a final answer: the harness ends after its first turn (plus any side calls).
  const mock = await startMockServer({ log: false, script: () => ({ content: 'done' }) });
  try {
    const sandbox = sandboxFor(input.sandbox, bin, input.nodeBin, input.tasksDir);
    const rendered = await Promise.all([0, 1].map((i) => firstCall(harness, bin, template, mock.url, path.join(dir, `sample-${i}`), sandbox, input)));
    const [a, b] = rendered as [RenderedCall, RenderedCall];
    return {
      tokens: a.tokens,
      tools: a.tools,
      mockTokens: a.mockTokens,
      difference: firstDifference(a.text, b.text, ['sample 1 (its own workspace and session)', 'sample 2']),
    };
  } finally {
    await mock.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The fixed paths a rollout's samples get (rollout/sandboxing.ts rolloutInsidePaths, the one
 * computation stages.ts uses), with the probe's harness binary mounted as its own; null unsandboxed.
 */
export function probeInsidePaths(kind: 'bwrap' | 'none', bin: string, nodeBin: string | undefined, tasksDir: string | undefined): InsidePaths | null {
  return rolloutInsidePaths(probeSettings(kind, '/bin/false'), { tasksDir: tasksDir ?? null, harnessBin: bin, nodeBin: nodeBin ?? null });
}

function probeSettings(kind: 'bwrap' | 'none', bwrap: string): SandboxSettings {
  return { kind, bwrap, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };
}

/** The rollout's sandbox for the harness (stages.ts): proxy-only, the fixed workspace and home paths. */
function sandboxFor(
  kind: 'bwrap' | 'none',
  bin: string,
  nodeBin: string | undefined,
  tasksDir: string | undefined,
): NonNullable<Parameters<typeof runHarness>[0]['sandbox']> | undefined {
  if (kind === 'none') return undefined;
  const bwrap = findBwrap();
  if (!bwrap)
    throw new PolarError('POLAR_USAGE', 'the first-prompt probe runs in the bwrap sandbox, and bubblewrap is not on PATH (Debian: apt-get install bubblewrap)');
  const fixed = probeInsidePaths(kind, bin, nodeBin, tasksDir)!;
  return { settings: probeSettings('bwrap', bwrap), network: 'proxy-only', cwdInside: fixed.workspace, ...fixedPlacement(fixed) };
}

interface RenderedCall {
  text: string;
  tokens: number;
  tools: number;
  mockTokens: number | null;
}

/** One sample: its workspace under `dir`, its own database and session, its first call with tools rendered. */
async function firstCall(
  harness: Harness,
  bin: string,
  template: ChatTemplate,
  upstream: string,
  dir: string,
  sandbox: ReturnType<typeof sandboxFor>,
  input: ProbeInput,
): Promise<RenderedCall> {
  fs.mkdirSync(dir);
  const task = probeTask(input.prompt);
  const timeoutSec = input.timeoutSec ?? 120;
  const workspace = await prepareWorkspace(task, path.join(dir, 'workspace'), Date.now() + timeoutSec * 1000, baseEnvironment());
  const dbPath = path.join(dir, 'polar.db');
  const result = await runHarness({
    harness,
    harnessBin: bin,
    prompt: task.prompt,
    cwd: workspace.dir,
    dbPath,
    upstream: { url: upstream, kind: 'vllm' },
    // As the agent runs its samples: compaction off (what a harness is told can change its prompt).
    appendOnly: true,
    timeoutSec,
    quiet: true,
    ...(sandbox ? { sandbox } : {}),
    ...(input.nodeBin ? { nodeBin: input.nodeBin } : {}),
    ...(input.onNotice ? { onNotice: input.onNotice } : {}),
  });
  const store = Store.open(dbPath, { readonly: true });
  try {
    const first = store.requests.tokens(result.session).find((c) => c.toolCount > 0);
    const record = first ? store.requests.get(first.id) : undefined;
    if (!record?.upstreamRequest) {
      const log = fs.existsSync(result.logFile) ? fs.readFileSync(result.logFile, 'utf8').slice(-1500) : '';
      throw new PolarError(
        'POLAR_USAGE',
        `measuring ${harness.name}'s first prompt: it made no model call with tools (exit ${result.exitCode})${log ? `; its log ends:\n${log}` : ''}`,
      );
    }
    const body = JSON.parse(record.upstreamRequest) as { messages?: TemplateMessage[]; tools?: unknown[]; chat_template_kwargs?: Record<string, unknown> };
    const text = template.render(body.messages ?? [], { tools: body.tools ?? [], addGenerationPrompt: true, kwargs: body.chat_template_kwargs ?? {} });
    return { text, tokens: template.encode(text).length, tools: body.tools?.length ?? 0, mockTokens: first?.promptIds?.length ?? null };
  } finally {
    store.close();
  }
}
