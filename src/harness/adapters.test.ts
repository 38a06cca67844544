import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { PolarError } from '../core/errors.js';
import { claudeCode } from './claude-code.js';
import { codex } from './codex.js';
import { shellQuote } from '../core/process/shell.js';
import { createCustomHarness } from './custom.js';
import { baseEnvironment } from './env.js';
import { geminiCli } from './gemini-cli.js';
import { opencode, opencodeConfigPath } from './opencode.js';
import { pi } from './pi.js';
import { qwenCode } from './qwen-code.js';
import { HARNESS_NAMES, getHarness } from './registry.js';
import type { Harness, HarnessContext } from './types.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) removeTree(d);
});

function makeCtx(overrides: Partial<HarnessContext> = {}): HarnessContext {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-harness-'));
  dirs.push(dir);
  return {
    proxyUrl: 'http://127.0.0.1:41234',
    session: 'run 7',
    apiKey: 'polar-run-7',
    model: 'Qwen/Qwen3-8B',
    home: path.join(dir, 'home'),
    cwd: path.join(dir, 'ws'),
    contextWindow: 40960,
    isRoot: false,
    appendOnly: false,
    ...overrides,
  };
}

// The session id is URL-encoded into the path (`run 7` → `run%207`).
const ROOT_URL = 'http://127.0.0.1:41234/s/run%207';
const V1_URL = `${ROOT_URL}/v1`;

/** A user's shell: provider keys and base URLs that must never reach a harness. */
const PARENT: NodeJS.ProcessEnv = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  LANG: 'C.UTF-8',
  TERM: 'xterm-256color',
  HOME: '/home/someone',
  ANTHROPIC_API_KEY: 'sk-real',
  ANTHROPIC_BASE_URL: 'https://api.anthropic.com',
  OPENAI_API_KEY: 'sk-real',
  OPENAI_BASE_URL: 'https://api.openai.com/v1',
  GEMINI_API_KEY: 'sk-real',
  CODEX_HOME: '/home/someone/.codex',
  CLAUDE_CONFIG_DIR: '/home/someone/.claude',
  OPENCODE_CONFIG: '/home/someone/opencode.json',
  AWS_SECRET_ACCESS_KEY: 'sk-real',
};
const BASE_ENV = baseEnvironment(PARENT);

const CUSTOM = createCustomHarness('mycli --base {base_url} --model {model} {prompt}');
const ADAPTERS: readonly Harness[] = [claudeCode, codex, geminiCli, qwenCode, pi, opencode, CUSTOM];

/** Exactly the variables each adapter adds to the allow-listed parent env (HOME included). */
const OWN_KEYS: Record<string, readonly string[]> = {
  'claude-code': [
    'HOME',
    'CLAUDE_CONFIG_DIR',
    'ANTHROPIC_BASE_URL',
    'ANTHROPIC_API_KEY',
    'ANTHROPIC_MODEL',
    'ANTHROPIC_DEFAULT_OPUS_MODEL',
    'ANTHROPIC_DEFAULT_SONNET_MODEL',
    'ANTHROPIC_DEFAULT_HAIKU_MODEL',
    'CLAUDE_CODE_SUBAGENT_MODEL',
    'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC',
    'DISABLE_AUTOUPDATER',
    'DISABLE_TELEMETRY',
    'DISABLE_ERROR_REPORTING',
    'CLAUDE_CODE_DISABLE_FAST_MODE',
    'CLAUDE_CODE_MAX_CONTEXT_TOKENS',
    'CLAUDE_CODE_MAX_OUTPUT_TOKENS',
  ],
  codex: ['HOME', 'CODEX_HOME', 'POLAR_API_KEY'],
  'gemini-cli': ['HOME', 'GEMINI_CLI_HOME', 'GOOGLE_GEMINI_BASE_URL', 'GEMINI_API_KEY', 'GEMINI_CLI_TRUST_WORKSPACE', 'GEMINI_CLI_NO_RELAUNCH'],
  'qwen-code': ['HOME', 'OPENAI_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_MODEL', 'QWEN_STREAM_IDLE_TIMEOUT_MS'],
  pi: ['HOME', 'PI_CODING_AGENT_DIR', 'PI_OFFLINE', 'PI_SKIP_VERSION_CHECK', 'POLAR_API_KEY'],
  opencode: ['HOME', 'OPENCODE_CONFIG', 'OPENCODE_DISABLE_MODELS_FETCH', 'OPENCODE_DISABLE_AUTOUPDATE', 'OPENCODE_DISABLE_LSP_DOWNLOAD', 'POLAR_API_KEY'],
  custom: [
    'HOME',
    'POLAR_BASE_URL',
    'POLAR_SESSION',
    'POLAR_MODEL',
    'POLAR_API_KEY',
    'OPENAI_BASE_URL',
    'OPENAI_API_KEY',
    'ANTHROPIC_BASE_URL',
    'ANTHROPIC_API_KEY',
    'GOOGLE_GEMINI_BASE_URL',
    'GEMINI_API_KEY',
  ],
};

const modeOf = (p: string): number => fs.statSync(p).mode & 0o777;
const readJson = (p: string): unknown => JSON.parse(fs.readFileSync(p, 'utf8'));

/** Enough TOML for what codex.ts writes: `[a.b]` tables and `key = <JSON-compatible scalar>`. */
function parseToml(text: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let table = root;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[([\w.]+)\]$/.exec(line);
    if (header) {
      table = root;
      for (const part of header[1]!.split('.')) {
        const next = (table[part] ??= {}) as Record<string, unknown>;
        table = next;
      }
      continue;
    }
    const kv = /^(\w+) = (.+)$/.exec(line);
    if (!kv) throw new Error(`unparsed TOML line: ${line}`);
    table[kv[1]!] = JSON.parse(kv[2]!);
  }
  return root;
}

describe.each(ADAPTERS.map((h) => [h.name, h] as const))('%s adapter: shared rules', (name, harness) => {
  it.each([
    ['headless', 'fix the bug'],
    ['interactive', null],
  ] as const)('%s env is the allow-list plus its own keys, never a parent secret', (_mode, prompt) => {
    const ctx = makeCtx();
    const { env, args } = harness.command('/opt/bin/x', ctx, prompt, [], BASE_ENV);
    expect(Object.keys(env).sort()).toEqual([...Object.keys(BASE_ENV), ...OWN_KEYS[name]!].sort());
    // The session key is a capability: in the env (or a private config file), never in argv, which `ps` shows.
    expect(Object.values(env)).toContain(ctx.apiKey);
    expect(args.join(' ')).not.toContain(ctx.apiKey);
    expect(Object.values(env)).not.toContain('sk-real');
    expect(JSON.stringify(env)).not.toMatch(/api\.openai\.com|api\.anthropic\.com|\/home\/someone/);
    expect(env.PATH).toBe(PARENT.PATH);
    // A private HOME: no harness reads the user's ~/.claude, ~/.codex, ~/.gemini, ~/.qwen or ~/.pi.
    expect(env.HOME).toBe(ctx.home);
    for (const key of ['CLAUDE_CONFIG_DIR', 'CODEX_HOME', 'GEMINI_CLI_HOME', 'PI_CODING_AGENT_DIR', 'OPENCODE_CONFIG']) {
      const value = env[key];
      if (value !== undefined) expect(path.relative(ctx.home, value)).not.toMatch(/^\.\./);
    }
  });

  it('writeConfig is idempotent and keeps everything private under ctx.home', async () => {
    const ctx = makeCtx();
    await harness.writeConfig(ctx);
    await harness.writeConfig(ctx);
    const walk = (p: string): string[] => [p, ...(fs.statSync(p).isDirectory() ? fs.readdirSync(p).flatMap((c) => walk(path.join(p, c))) : [])];
    for (const p of walk(ctx.home)) expect(modeOf(p)).toBe(fs.statSync(p).isDirectory() ? 0o700 : 0o600);
  });

  it("in a rollout's sandbox, writes config at the host's home but names only the fixed paths to the harness", async () => {
    // Two samples: their own host folders (and sessions), the same fixed paths inside (fixed-paths.ts).
    const samples = [0, 1].map((i) => {
      const host = makeCtx();
      return { ...host, session: `ses_${i}`, home: '/home/agent', cwd: '/workspace', hostHome: host.home, hostCwd: host.cwd };
    });
    const envs = [];
    for (const ctx of samples) {
      await harness.writeConfig(ctx);
      expect(fs.existsSync(ctx.hostHome)).toBe(true);
      const { env } = harness.command('/opt/bin/x', ctx, 'fix the bug', [], BASE_ENV);
      expect(env.HOME).toBe('/home/agent');
      for (const key of ['CLAUDE_CONFIG_DIR', 'CODEX_HOME', 'GEMINI_CLI_HOME', 'PI_CODING_AGENT_DIR', 'OPENCODE_CONFIG'])
        if (env[key] !== undefined) expect(env[key]!.startsWith('/home/agent')).toBe(true);
      // No host folder of the sample's anywhere in what the harness is given.
      expect(JSON.stringify(env)).not.toContain(ctx.hostHome);
      expect(JSON.stringify(env)).not.toContain(path.dirname(ctx.hostHome));
      envs.push(env);
    }
    // The env differs only where the session must ride (the proxy URL and the session's key).
    const paths = (env: Record<string, string>) => Object.entries(env).filter(([, v]) => v.startsWith('/'));
    expect(paths(envs[0]!)).toEqual(paths(envs[1]!));
  });
});

describe('claude-code', () => {
  it('trusts the workspace at the path the sandbox shows it, which the host does not have', async () => {
    const host = makeCtx();
    fs.mkdirSync(host.cwd, { recursive: true });
    const ctx = { ...host, home: '/home/agent', cwd: '/workspace', hostHome: host.home, hostCwd: host.cwd };
    await claudeCode.writeConfig(ctx);
    const state = readJson(path.join(host.home, '.claude', '.claude.json')) as { projects: Record<string, unknown> };
    expect(Object.keys(state.projects)).toEqual(['/workspace']);
  });

  it('runs headless with stream-json, skipping permissions, the prompt after --', () => {
    const ctx = makeCtx();
    const cmd = claudeCode.command('/opt/bin/claude', ctx, '-v please', ['--max-turns', '5'], BASE_ENV);
    expect(cmd.file).toBe('/opt/bin/claude');
    expect(cmd.args).toEqual([
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--model',
      'Qwen/Qwen3-8B',
      '--max-turns',
      '5',
      '--',
      '-v please',
    ]);
    expect(cmd.env).toMatchObject({
      ANTHROPIC_BASE_URL: ROOT_URL,
      ANTHROPIC_API_KEY: 'polar-run-7',
      ANTHROPIC_MODEL: 'Qwen/Qwen3-8B',
      ANTHROPIC_DEFAULT_OPUS_MODEL: 'Qwen/Qwen3-8B',
      ANTHROPIC_DEFAULT_SONNET_MODEL: 'Qwen/Qwen3-8B',
      ANTHROPIC_DEFAULT_HAIKU_MODEL: 'Qwen/Qwen3-8B',
      CLAUDE_CODE_SUBAGENT_MODEL: 'Qwen/Qwen3-8B',
      CLAUDE_CONFIG_DIR: path.join(ctx.home, '.claude'),
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_CONTEXT_TOKENS: '40960',
      // A quarter of the window: the 32,000 default left no room for the prompt (compaction loop).
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '10240',
    });
  });

  it('runs interactive with the model pinned', () => {
    const cmd = claudeCode.command('claude', makeCtx(), null, [], BASE_ENV);
    expect(cmd.args).toEqual(['--model', 'Qwen/Qwen3-8B', '--dangerously-skip-permissions']);
  });

  it('sets IS_SANDBOX only as root, and the window only when known', () => {
    expect(claudeCode.command('claude', makeCtx(), 'x', [], BASE_ENV).env.IS_SANDBOX).toBeUndefined();
    expect(claudeCode.command('claude', makeCtx({ isRoot: true }), 'x', [], BASE_ENV).env.IS_SANDBOX).toBe('1');
    expect(claudeCode.command('claude', makeCtx({ contextWindow: null }), 'x', [], BASE_ENV).env.CLAUDE_CODE_MAX_CONTEXT_TOKENS).toBeUndefined();
  });

  it('answers the first-run screens up front, keeping what Claude Code stored itself', async () => {
    const ctx = makeCtx({ apiKey: 'polar-ses_0123456789abcdefghijkl' });
    fs.mkdirSync(ctx.cwd, { recursive: true });
    const dir = path.join(ctx.home, '.claude');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      path.join(dir, '.claude.json'),
      JSON.stringify({ numStartups: 3, customApiKeyResponses: { approved: ['other'], rejected: ['23456789abcdefghijkl'] } }),
    );
    await claudeCode.writeConfig(ctx);
    await claudeCode.writeConfig(ctx);
    expect(modeOf(dir)).toBe(0o700);
    expect(modeOf(path.join(dir, '.claude.json'))).toBe(0o600);
    expect(readJson(path.join(dir, '.claude.json'))).toEqual({
      numStartups: 3,
      hasCompletedOnboarding: true,
      // The last 20 characters of the key, once, and no longer rejected.
      customApiKeyResponses: { approved: ['other', '23456789abcdefghijkl'], rejected: [] },
      projects: { [fs.realpathSync(ctx.cwd)]: { hasTrustDialogAccepted: true } },
    });
    expect(readJson(path.join(dir, 'settings.json'))).toEqual({ skipDangerousModePermissionPrompt: true });
  });
});

describe('codex', () => {
  it('runs `exec` headless with the sandbox bypassed, the prompt after --', () => {
    const ctx = makeCtx();
    const cmd = codex.command('codex', ctx, 'resume', [], BASE_ENV);
    expect(cmd.args).toEqual(['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--json', '-m', 'Qwen/Qwen3-8B', '--', 'resume']);
    expect(cmd.env).toMatchObject({ CODEX_HOME: path.join(ctx.home, '.codex'), POLAR_API_KEY: 'polar-run-7' });
  });

  it('runs interactive without `exec`', () => {
    expect(codex.command('codex', makeCtx(), null, ['--foo'], BASE_ENV).args).toEqual([
      '--dangerously-bypass-approvals-and-sandbox',
      '-m',
      'Qwen/Qwen3-8B',
      '--foo',
    ]);
  });

  it('writes a custom Responses provider pointed at the session', async () => {
    const ctx = makeCtx();
    await codex.writeConfig(ctx);
    const file = path.join(ctx.home, '.codex', 'config.toml');
    expect(modeOf(file)).toBe(0o600);
    expect(parseToml(fs.readFileSync(file, 'utf8'))).toEqual({
      model: 'Qwen/Qwen3-8B',
      model_provider: 'polar',
      check_for_update_on_startup: false,
      model_context_window: 40960,
      model_auto_compact_token_limit: 32768,
      model_providers: { polar: { name: 'polar', base_url: V1_URL, env_key: 'POLAR_API_KEY', wire_api: 'responses' } },
    });
  });

  it('leaves the window to Codex when unknown, and escapes odd model names', async () => {
    const ctx = makeCtx({ contextWindow: null, model: 'a "quoted"\\name' });
    await codex.writeConfig(ctx);
    const toml = parseToml(fs.readFileSync(path.join(ctx.home, '.codex', 'config.toml'), 'utf8'));
    expect(toml.model).toBe('a "quoted"\\name');
    expect(toml).not.toHaveProperty('model_context_window');
    expect(toml).not.toHaveProperty('model_auto_compact_token_limit');
  });
});

describe('gemini-cli', () => {
  it('runs headless in yolo mode with stream-json', () => {
    const ctx = makeCtx();
    const cmd = geminiCli.command('gemini', ctx, '-x y', [], BASE_ENV);
    expect(cmd.args).toEqual(['--prompt=-x y', '--approval-mode=yolo', '--skip-trust', '-m', 'Qwen/Qwen3-8B', '-o', 'stream-json']);
    expect(cmd.env).toMatchObject({
      GEMINI_CLI_HOME: ctx.home,
      GOOGLE_GEMINI_BASE_URL: ROOT_URL,
      GEMINI_API_KEY: 'polar-run-7',
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      GEMINI_CLI_NO_RELAUNCH: 'true',
    });
  });

  it('runs interactive without a prompt', () => {
    expect(geminiCli.command('gemini', makeCtx(), null, [], BASE_ENV).args).toEqual(['--approval-mode=yolo', '--skip-trust', '-m', 'Qwen/Qwen3-8B']);
  });

  it('writes settings that select API-key auth and turn off telemetry and updates', async () => {
    const ctx = makeCtx();
    await geminiCli.writeConfig(ctx);
    const file = path.join(ctx.home, '.gemini', 'settings.json');
    expect(modeOf(file)).toBe(0o600);
    expect(readJson(file)).toEqual({
      security: { auth: { selectedType: 'gemini-api-key' } },
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false },
    });
  });
});

describe('qwen-code', () => {
  it('runs headless in yolo mode with stream-json, all three OpenAI variables set', () => {
    const ctx = makeCtx();
    const cmd = qwenCode.command('qwen', ctx, 'do it', [], BASE_ENV);
    expect(cmd.args).toEqual(['--yolo', '--prompt=do it', '--output-format', 'stream-json']);
    expect(cmd.env).toMatchObject({
      HOME: ctx.home,
      OPENAI_BASE_URL: V1_URL,
      OPENAI_API_KEY: 'polar-run-7',
      OPENAI_MODEL: 'Qwen/Qwen3-8B',
      QWEN_STREAM_IDLE_TIMEOUT_MS: '0',
    });
    expect(qwenCode.minNodeMajor).toBe(22);
  });

  it('runs interactive in yolo mode', () => {
    expect(qwenCode.command('qwen', makeCtx(), null, [], BASE_ENV).args).toEqual(['--yolo']);
  });
});

describe('pi', () => {
  it('runs headless offline, without a session, in json mode', () => {
    const ctx = makeCtx();
    const cmd = pi.command('pi', ctx, 'task', ['--thinking', 'off'], BASE_ENV);
    expect(cmd.args).toEqual(['--offline', '--no-session', '--mode', 'json', '--provider', 'polar', '--model', 'Qwen/Qwen3-8B', '--thinking', 'off', 'task']);
    expect(cmd.env).toMatchObject({
      PI_CODING_AGENT_DIR: path.join(ctx.home, '.pi', 'agent'),
      PI_OFFLINE: '1',
      PI_SKIP_VERSION_CHECK: '1',
      POLAR_API_KEY: 'polar-run-7',
    });
  });

  it('runs interactive with the polar provider', () => {
    expect(pi.command('pi', makeCtx(), null, [], BASE_ENV).args).toEqual(['--offline', '--provider', 'polar', '--model', 'Qwen/Qwen3-8B']);
  });

  it('writes a provider whose model sends the system prompt as `system`', async () => {
    const ctx = makeCtx();
    await pi.writeConfig(ctx);
    const file = path.join(ctx.home, '.pi', 'agent', 'models.json');
    expect(modeOf(file)).toBe(0o600);
    expect(readJson(file)).toEqual({
      providers: {
        polar: {
          baseUrl: V1_URL,
          api: 'openai-completions',
          apiKey: 'POLAR_API_KEY',
          models: [
            {
              id: 'Qwen/Qwen3-8B',
              name: 'Qwen/Qwen3-8B',
              reasoning: true,
              input: ['text'],
              contextWindow: 40960,
              maxTokens: 8192,
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              compat: { supportsDeveloperRole: false },
            },
          ],
        },
      },
    });
  });

  it('leaves the window to pi when unknown, and caps output for a small window', async () => {
    const unknown = makeCtx({ contextWindow: null });
    await pi.writeConfig(unknown);
    const [model] = (readJson(path.join(unknown.home, '.pi', 'agent', 'models.json')) as { providers: { polar: { models: Record<string, unknown>[] } } })
      .providers.polar.models;
    expect(model).not.toHaveProperty('contextWindow');
    const small = makeCtx({ contextWindow: 8192 });
    await pi.writeConfig(small);
    expect(fs.readFileSync(path.join(small.home, '.pi', 'agent', 'models.json'), 'utf8')).toContain('"maxTokens": 2048');
  });
});

describe('opencode', () => {
  it('runs `run` headless with json events, the prompt after --', () => {
    const ctx = makeCtx();
    const cmd = opencode.command('opencode', ctx, '--help me', [], BASE_ENV);
    expect(cmd.args).toEqual(['run', '--format', 'json', '-m', 'polar/Qwen/Qwen3-8B', '--', '--help me']);
    expect(cmd.env).toMatchObject({ OPENCODE_CONFIG: path.join(ctx.home, 'opencode.json'), OPENCODE_DISABLE_MODELS_FETCH: '1', POLAR_API_KEY: 'polar-run-7' });
  });

  it('runs the TUI interactive', () => {
    expect(opencode.command('opencode', makeCtx(), null, [], BASE_ENV).args).toEqual(['-m', 'polar/Qwen/Qwen3-8B']);
  });

  it('writes an openai-compatible provider, every permission allowed', async () => {
    const ctx = makeCtx();
    await opencode.writeConfig(ctx);
    const file = path.join(ctx.home, 'opencode.json');
    expect(modeOf(file)).toBe(0o600);
    expect(readJson(file)).toEqual({
      $schema: 'https://opencode.ai/config.json',
      provider: {
        polar: {
          npm: '@ai-sdk/openai-compatible',
          name: 'polar',
          options: { baseURL: V1_URL, apiKey: '{env:POLAR_API_KEY}' },
          models: { 'Qwen/Qwen3-8B': { name: 'Qwen/Qwen3-8B', limit: { context: 40960, output: 10240 } } },
        },
      },
      model: 'polar/Qwen/Qwen3-8B',
      small_model: 'polar/Qwen/Qwen3-8B',
      autoupdate: false,
      share: 'disabled',
      permission: 'allow',
    });
  });
});

describe('custom', () => {
  const run = (template: string, prompt: string | null, extra: readonly string[] = []): string => {
    const ctx = makeCtx();
    const cmd = createCustomHarness(template).command('sh', ctx, prompt, extra, BASE_ENV);
    const result = spawnSync(cmd.file, cmd.args, { env: cmd.env, encoding: 'utf8' });
    expect(result.status).toBe(0);
    return result.stdout;
  };

  it('keeps quotes, $(…), backticks and ; in a prompt literal', () => {
    const prompt = `it's "quoted" $(rm -rf /) \`id\` $HOME; echo pwned`;
    expect(run('echo {prompt}', prompt)).toBe(`${prompt}\n`);
  });

  it('substitutes every placeholder, quoted, in one pass', () => {
    const out = run('echo {base_url} {base_root} {model} {session} {api_key} {prompt}', '{model}');
    expect(out).toBe(`${V1_URL} ${ROOT_URL} Qwen/Qwen3-8B run 7 polar-run-7 {model}\n`);
  });

  it('drops {prompt} when interactive, quotes extra args, and leaves ${VAR} to the shell', () => {
    expect(run('echo x{prompt}x ${POLAR_SESSION}', null, ['a b', "c'd"])).toBe("xx run 7 a b c'd\n");
  });

  it('runs under /bin/sh with the redirect variables of every SDK', () => {
    const ctx = makeCtx();
    const cmd = CUSTOM.command('sh', ctx, 'p', [], BASE_ENV);
    expect(cmd.file).toBe('/bin/sh');
    expect(cmd.args).toEqual(['-c', `mycli --base '${V1_URL}' --model 'Qwen/Qwen3-8B' 'p'`]);
    expect(cmd.env).toMatchObject({
      POLAR_BASE_URL: V1_URL,
      OPENAI_BASE_URL: V1_URL,
      OPENAI_API_KEY: 'polar-run-7',
      ANTHROPIC_BASE_URL: ROOT_URL,
      ANTHROPIC_API_KEY: 'polar-run-7',
      GOOGLE_GEMINI_BASE_URL: ROOT_URL,
      GEMINI_API_KEY: 'polar-run-7',
      POLAR_SESSION: 'run 7',
      POLAR_MODEL: 'Qwen/Qwen3-8B',
    });
    expect(CUSTOM).toMatchObject({ name: 'custom', provider: 'openai-chat', packageName: null, binName: 'sh' });
  });

  it('rejects an unknown placeholder and an empty template', () => {
    expect(() => createCustomHarness('mycli {base_uri}')).toThrow(/unknown placeholder \{base_uri\}/);
    expect(() => createCustomHarness('  ')).toThrow(PolarError);
  });

  it('quotes a single quote the POSIX way', () => {
    expect(shellQuote("a'b")).toBe(`'a'\\''b'`);
  });
});

describe('agent headers', () => {
  const FIXTURES = fileURLToPath(new URL('../../fixtures/requests/', import.meta.url));

  // Every recorded call is the main agent's: none may carry a header the adapter reads as an agent
  // name, or the main agent would not be filed as `main`.
  it.each(ADAPTERS.filter((h) => fs.existsSync(path.join(FIXTURES, h.name))).map((h) => [h.name, h] as const))(
    '%s: recorded main-agent calls name no agent',
    (_name, harness) => {
      const dir = path.join(FIXTURES, harness.name);
      const files = fs.readdirSync(dir).filter((f) => /^\d+-.*\.json$/.test(f));
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) {
        const { headers } = readJson(path.join(dir, f)) as { headers: Record<string, string> };
        for (const h of harness.agentHeaders) expect(headers).not.toHaveProperty(h);
      }
    },
  );

  it('are chosen per harness', () => {
    expect(Object.fromEntries(ADAPTERS.map((h) => [h.name, h.agentHeaders]))).toEqual({
      'claude-code': ['x-claude-code-agent-id'],
      codex: ['x-openai-subagent'],
      'gemini-cli': [],
      'qwen-code': [],
      pi: [],
      opencode: ['x-parent-session-id'],
      custom: ['x-polar-agent'],
    });
  });
});

describe('registry', () => {
  it('knows every harness', () => {
    expect([...HARNESS_NAMES].sort()).toEqual(['claude-code', 'codex', 'custom', 'gemini-cli', 'opencode', 'pi', 'qwen-code']);
    for (const name of HARNESS_NAMES) expect(getHarness(name, { command: 'echo {prompt}' }).name).toBe(name);
  });

  it('rejects an unknown name, listing the valid ones', () => {
    const err = (() => {
      try {
        getHarness('aider', {});
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(PolarError);
    expect(err).toMatchObject({ code: 'POLAR_USAGE' });
    expect((err as PolarError).message).toContain(HARNESS_NAMES.join(', '));
  });

  it('needs a command template for custom', () => {
    expect(() => getHarness('custom', {})).toThrow(expect.objectContaining({ code: 'POLAR_USAGE' }));
  });
});

/**
 * Append-only (rollout, worker, gym-agent, train): each harness's compaction and history trimming
 * switched off by the settings read in its code at the tested version (test/e2e/long-session.test.ts
 * runs each real CLI past its compaction point); `polar run` (appendOnly false) keeps its defaults.
 */
describe('append-only: compaction off by configuration', () => {
  it('claude-code: every compaction path gated off, and the client-side block moved to the window', () => {
    const on = claudeCode.command('claude', makeCtx({ appendOnly: true }), 'x', [], BASE_ENV).env;
    expect(on).toMatchObject({
      DISABLE_AUTO_COMPACT: '1',
      DISABLE_COMPACT: '1',
      CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE: '40960',
      CLAUDE_CODE_MAX_CONTEXT_TOKENS: '40960',
    });
    const off = claudeCode.command('claude', makeCtx(), 'x', [], BASE_ENV).env;
    for (const k of ['DISABLE_AUTO_COMPACT', 'DISABLE_COMPACT', 'CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE']) expect(off, k).not.toHaveProperty(k);
  });

  it('codex: the compaction limit one past the window, the window told large enough that 90% of it is above that', async () => {
    const ctx = makeCtx({ appendOnly: true });
    await codex.writeConfig(ctx);
    const toml = parseToml(fs.readFileSync(path.join(ctx.home, '.codex', 'config.toml'), 'utf8'));
    expect(toml.model_auto_compact_token_limit).toBe(40961);
    expect(Math.floor((toml.model_context_window as number) * 0.9)).toBeGreaterThanOrEqual(40961);
  });

  it('gemini-cli: compression held to its token limit', async () => {
    const ctx = makeCtx({ appendOnly: true });
    await geminiCli.writeConfig(ctx);
    expect(readJson(path.join(ctx.home, '.gemini', 'settings.json'))).toMatchObject({
      model: { compressionThreshold: 1 },
      security: { auth: { selectedType: 'gemini-api-key' } },
    });
  });

  it('qwen-code: no settings at its defaults; append-only a window past any compaction point and a session limit at 90% of the real one', async () => {
    const file = (ctx: HarnessContext) => path.join(ctx.home, '.qwen', 'settings.json');
    const plain = makeCtx();
    await qwenCode.writeConfig(plain);
    expect(fs.existsSync(file(plain))).toBe(false);
    const ctx = makeCtx({ appendOnly: true });
    await qwenCode.writeConfig(ctx);
    expect(modeOf(file(ctx))).toBe(0o600);
    expect(readJson(file(ctx))).toEqual({
      model: { generationConfig: { contextWindowSize: 4_096_000 }, sessionTokenLimit: 36864 },
      context: { clearContextOnIdle: { toolResultsThresholdMinutes: -1 } },
    });
  });

  it('pi: settings.json with compaction disabled, beside models.json, only append-only', async () => {
    const ctx = makeCtx({ appendOnly: true });
    await pi.writeConfig(ctx);
    expect(readJson(path.join(ctx.home, '.pi', 'agent', 'settings.json'))).toEqual({ compaction: { enabled: false } });
    const plain = makeCtx();
    await pi.writeConfig(plain);
    expect(fs.existsSync(path.join(plain.home, '.pi', 'agent', 'settings.json'))).toBe(false);
  });

  it('opencode: compaction.auto and prune off', async () => {
    const ctx = makeCtx({ appendOnly: true });
    await opencode.writeConfig(ctx);
    expect(readJson(opencodeConfigPath(ctx.home))).toMatchObject({ compaction: { auto: false, prune: false } });
    const plain = makeCtx();
    await opencode.writeConfig(plain);
    expect(readJson(opencodeConfigPath(plain.home))).not.toHaveProperty('compaction');
  });

  it('names the rewrites no setting stops: Gemini CLI, Qwen Code and a custom command, not the others', () => {
    const gaps = Object.fromEntries(HARNESS_NAMES.map((n) => [n, (n === 'custom' ? createCustomHarness('x') : getHarness(n)).appendOnlyGap !== null]));
    expect(gaps).toEqual({ 'claude-code': false, codex: false, 'gemini-cli': true, 'qwen-code': true, pi: false, opencode: false, custom: true });
  });
});
