import { Box, type Key, render, Text, useApp, useInput, useStdout } from 'ink';
import { useEffect, useMemo, useState } from 'react';
import { breakBefore, type InspectCall, type SessionModel, seqOf } from '../../inspect/session-model.js';
import {
  BAND_LABELS,
  callStrip,
  layoutStrip,
  logprobBand,
  searchLines,
  type StripSegment,
  type StripToken,
  type TokenPieces,
  traceStrip,
} from '../../inspect/token-strip.js';
import type { SessionSummary } from '../../store/sessions.js';
import { formatTime } from '../output.js';
import { count } from '../plural.js';

/** Where the browser reads from: the database's sessions, one session's model, and token text. */
export interface BrowserSource {
  sessions(): SessionSummary[];
  session(id: string): SessionModel | undefined;
  pieces: TokenPieces;
}

type Screen =
  | { kind: 'sessions'; cursor: number; query: string }
  | { kind: 'calls'; model: SessionModel; cursor: number; query: string }
  | { kind: 'traces'; model: SessionModel; cursor: number }
  | { kind: 'tokens'; title: string; strip: StripToken[]; top: number | null; query: string; match: number };

/** Sampled-token colours by logprob band (see logprobBand), shared in spirit with the HTML report. */
export const BAND_COLOURS = ['#43a047', '#c0ca33', '#fdd835', '#fb8c00', '#e53935'] as const;

/** What `|` puts before each token so its boundaries show without colour. */
const BOUNDARY = '│';

const KEYS: Record<Screen['kind'], string> = {
  sessions: '↑↓ move · enter open · / search · q quit',
  calls: '↑↓ move · enter tokens · t traces · / search · esc back · q quit',
  traces: '↑↓ move · enter tokens · esc back · q quit',
  tokens: '↑↓ scroll · space/b page · g/G top/end · s sampled · / search · n/N next/prev · | boundaries · esc back · q quit',
};

/**
 * `polar show` on a terminal: sessions → one session's calls grouped by agent → one call's tokens
 * (prompt dimmed, sampled coloured by logprob, boundaries visible) → the session's prefix-merged
 * traces with the break that started each and its class. Read-only.
 */
export function SessionBrowser({ source, sessionId }: { source: BrowserSource; sessionId?: string }) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const width = Math.max(40, (stdout.columns ?? 100) - 1);
  const rows = Math.max(8, (stdout.rows ?? 24) - 6);
  const sessions = useMemo(() => source.sessions(), [source]);
  const env: Env = { source, sessions, width, rows };
  const [state, setState] = useState<BrowserState>(() => {
    const stack: Screen[] = [{ kind: 'sessions', cursor: 0, query: '' }];
    const model = sessionId ? source.session(sessionId) : undefined;
    if (model) stack.push({ kind: 'calls', model, cursor: 0, query: '' });
    return { stack, editing: null, boundaries: false, quit: false };
  });
  // Each key is applied to the state as it is then (not as this render saw it), so keys typed or
  // pasted faster than the terminal redraws are not lost.
  useInput((input, key) => setState((s) => step(s, env, input, key)));
  useEffect(() => {
    if (state.quit) exit();
  }, [state.quit, exit]);

  const { editing } = state;
  const screen = state.stack[state.stack.length - 1]!;
  const visibleSessions = screen.kind === 'sessions' ? filterSessions(sessions, screen.query) : [];
  const visibleCalls = screen.kind === 'calls' ? filterCalls(allCallsByAgent(screen.model), screen.query) : [];
  const lines = screen.kind === 'tokens' ? linesOf(screen, env, state.boundaries) : [];
  const tokenTop = screen.kind === 'tokens' ? topOf(screen, lines, rows) : 0;
  const matches = screen.kind === 'tokens' ? searchLines(lines, screen.query) : [];

  return (
    <Box flexDirection="column">
      {screen.kind === 'sessions' ? (
        <SessionsScreen sessions={visibleSessions} cursor={screen.cursor} rows={rows} query={screen.query} total={sessions.length} />
      ) : null}
      {screen.kind === 'calls' ? <CallsScreen model={screen.model} calls={visibleCalls} cursor={screen.cursor} rows={rows} query={screen.query} /> : null}
      {screen.kind === 'traces' ? <TracesScreen model={screen.model} cursor={screen.cursor} rows={rows} /> : null}
      {screen.kind === 'tokens' ? (
        <TokensScreen
          title={screen.title}
          strip={screen.strip}
          lines={lines}
          top={tokenTop}
          rows={rows}
          query={screen.query}
          matches={matches}
          match={screen.match}
        />
      ) : null}
      <Text color="gray">{editing !== null ? `/${editing}█  (enter search · esc cancel)` : KEYS[screen.kind]}</Text>
    </Box>
  );
}

interface BrowserState {
  stack: Screen[];
  /** The search being typed after `/`, or null. */
  editing: string | null;
  boundaries: boolean;
  quit: boolean;
}

interface Env {
  source: BrowserSource;
  sessions: SessionSummary[];
  width: number;
  rows: number;
}

type TokensScreenState = Extract<Screen, { kind: 'tokens' }>;

/** One key applied to the browser's state: pure, so that keys apply in order whatever the redraws do. */
function step(state: BrowserState, env: Env, input: string, key: Key): BrowserState {
  const screen = state.stack[state.stack.length - 1]!;
  const replace = (next: Screen): BrowserState => ({ ...state, stack: [...state.stack.slice(0, -1), next] });
  const push = (next: Screen): BrowserState => ({ ...state, stack: [...state.stack, next] });
  if (state.editing !== null) {
    if (key.escape) return { ...state, editing: null };
    if (key.return) return { ...search(state, env, state.editing), editing: null };
    if (key.backspace || key.delete) return { ...state, editing: state.editing.slice(0, -1) };
    if (input && !key.ctrl && !key.meta) return { ...state, editing: state.editing + input };
    return state;
  }
  if (input === 'q' || (key.ctrl && input === 'c')) return { ...state, quit: true };
  if (input === '/') return { ...state, editing: '' };
  if (key.escape || key.leftArrow || key.backspace) return state.stack.length > 1 ? { ...state, stack: state.stack.slice(0, -1) } : state;
  const up = key.upArrow || input === 'k';
  const down = key.downArrow || input === 'j';
  switch (screen.kind) {
    case 'sessions': {
      const list = filterSessions(env.sessions, screen.query);
      if (up || down) return replace({ ...screen, cursor: clamp(screen.cursor + (up ? -1 : 1), 0, list.length - 1) });
      if (key.return || key.rightArrow) {
        const s = list[screen.cursor];
        const model = s ? env.source.session(s.id) : undefined;
        if (model) return push({ kind: 'calls', model, cursor: 0, query: '' });
      }
      return state;
    }
    case 'calls': {
      const list = filterCalls(allCallsByAgent(screen.model), screen.query);
      if (up || down) return replace({ ...screen, cursor: clamp(screen.cursor + (up ? -1 : 1), 0, list.length - 1) });
      if (input === 't') return push({ kind: 'traces', model: screen.model, cursor: 0 });
      if (key.return || key.rightArrow) {
        const call = list[screen.cursor];
        if (call?.promptIds || call?.sampledIds)
          return push({
            kind: 'tokens',
            title: callTitle(call),
            strip: callStrip(call.promptIds ?? [], call.sampledIds ?? [], call.logprobs),
            top: null,
            query: '',
            match: -1,
          });
      }
      return state;
    }
    case 'traces': {
      if (up || down) return replace({ ...screen, cursor: clamp(screen.cursor + (up ? -1 : 1), 0, screen.model.traces.length - 1) });
      if (key.return || key.rightArrow) {
        const trace = screen.model.traces[screen.cursor];
        if (trace) return push({ kind: 'tokens', title: traceTitle(screen.model, screen.cursor), strip: traceStrip(trace), top: null, query: '', match: -1 });
      }
      return state;
    }
    case 'tokens': {
      if (input === '|') return { ...state, boundaries: !state.boundaries };
      const lines = linesOf(screen, env, state.boundaries);
      const top = topOf(screen, lines, env.rows);
      const move = (to: number) => replace({ ...screen, top: clamp(to, 0, Math.max(0, lines.length - env.rows)) });
      const page = env.rows - 1;
      if (up || down) return move(top + (up ? -1 : 1));
      if (input === ' ' || key.pageDown) return move(top + page);
      if (input === 'b' || key.pageUp) return move(top - page);
      if (input === 'g') return move(0);
      if (input === 'G') return move(lines.length);
      if (input === 's') return move(firstSampledLine(lines, screen.strip) - 3);
      if (input === 'n' || input === 'N') {
        const matches = searchLines(lines, screen.query);
        if (matches.length === 0) return state;
        const next = (screen.match + (input === 'n' ? 1 : -1) + matches.length) % matches.length;
        return replace({ ...screen, match: next, top: clamp(matches[next]!, 0, Math.max(0, lines.length - env.rows)) });
      }
      return state;
    }
  }
}

/** `/` then enter: filter the list on list screens, jump to the first hit at or below the view on token screens. */
function search(state: BrowserState, env: Env, query: string): BrowserState {
  const screen = state.stack[state.stack.length - 1]!;
  const replace = (next: Screen): BrowserState => ({ ...state, stack: [...state.stack.slice(0, -1), next] });
  if (screen.kind === 'sessions' || screen.kind === 'calls') return replace({ ...screen, query, cursor: 0 });
  if (screen.kind !== 'tokens') return state;
  const lines = linesOf(screen, env, state.boundaries);
  const hits = searchLines(lines, query);
  const first = hits.findIndex((l) => l >= topOf(screen, lines, env.rows));
  const match = hits.length === 0 ? -1 : first === -1 ? 0 : first;
  return replace({ ...screen, query, match, top: match === -1 ? screen.top : clamp(hits[match]!, 0, Math.max(0, lines.length - env.rows)) });
}

/** A token screen's lines, laid out once per strip, width and boundary setting. */
const layouts = new WeakMap<StripToken[], { key: string; lines: StripSegment[][] }>();
function linesOf(screen: TokensScreenState, env: Env, boundaries: boolean): StripSegment[][] {
  const key = `${env.width}:${boundaries}`;
  const cached = layouts.get(screen.strip);
  if (cached?.key === key) return cached.lines;
  const lines = layoutStrip(screen.strip, env.source.pieces, env.width, boundaries ? BOUNDARY : '');
  layouts.set(screen.strip, { key, lines });
  return lines;
}

/** Where a token screen's view starts: where the user scrolled, else just above the first sampled token. */
function topOf(screen: TokensScreenState, lines: StripSegment[][], rows: number): number {
  return clamp(screen.top ?? firstSampledLine(lines, screen.strip) - 3, 0, Math.max(0, lines.length - rows));
}

function SessionsScreen({ sessions, cursor, rows, query, total }: { sessions: SessionSummary[]; cursor: number; rows: number; query: string; total: number }) {
  const [from, to] = windowAround(cursor, sessions.length, rows);
  return (
    <Box flexDirection="column">
      <Text bold>{`sessions  ${query ? `matching "${query}": ${sessions.length} of ${total}` : `${total}`}`}</Text>
      {sessions.length === 0 ? (
        <Text color="yellow">
          {query ? 'no session matches; / to search again' : 'no sessions in this database yet: record one with `polar run` or `polar demo`'}
        </Text>
      ) : null}
      {sessions.slice(from, to).map((s, i) => (
        <Text key={s.id} inverse={from + i === cursor} wrap="truncate-end">
          {`${from + i === cursor ? '›' : ' '} ${s.id}  ${pad(s.status, 11)} ${pad(s.harness ?? '-', 12)} ${pad(count(s.requests, 'call'), 9)} ${pad(`${s.promptTokens}+${s.sampledTokens} tok`, 16)} ${formatTime(s.createdAt)}`}
        </Text>
      ))}
    </Box>
  );
}

function CallsScreen({ model, calls, cursor, rows, query }: { model: SessionModel; calls: InspectCall[]; cursor: number; rows: number; query: string }) {
  const s = model.session;
  const lines: { key: string; text: string; selected?: boolean; tone?: string }[] = [];
  let agent = '';
  calls.forEach((c, i) => {
    if (c.agentId !== agent) {
      agent = c.agentId;
      const count = model.agents.find((a) => a.id === agent)?.calls.length ?? 0;
      lines.push({ key: `agent-${agent}`, text: `agent ${agent} · ${count} call${count === 1 ? '' : 's'}`, tone: 'heading' });
    }
    lines.push({ key: c.id, text: callRow(c), selected: i === cursor, tone: c.status !== 'ok' ? 'red' : c.excluded ? 'yellow' : undefined });
  });
  const selectedLine = lines.findIndex((l) => l.selected);
  const [from, to] = windowAround(Math.max(0, selectedLine), lines.length, rows - 2);
  return (
    <Box flexDirection="column">
      <Text
        bold
      >{`session ${s.id}  ${s.status}${s.harness ? `  ${s.harness}${s.harnessVersion ? ` ${s.harnessVersion}` : ''}` : ''}  ${count(s.requests, 'call')}  ${s.promptTokens} prompt / ${s.sampledTokens} sampled tokens  ${model.traces.length} trace${model.traces.length === 1 ? '' : 's'}`}</Text>
      <Text color="gray">{rolloutLine(model) ?? `created ${formatTime(s.createdAt)}${query ? `  ·  calls matching "${query}": ${calls.length}` : ''}`}</Text>
      {calls.length === 0 ? <Text color="yellow">{query ? 'no call matches' : 'no calls recorded'}</Text> : null}
      {lines.slice(from, to).map((l) =>
        l.tone === 'heading' ? (
          <Text key={l.key} bold color="cyan">
            {l.text}
          </Text>
        ) : (
          <Text key={l.key} inverse={l.selected} color={l.tone} wrap="truncate-end">
            {`${l.selected ? '›' : ' '} ${l.text}`}
          </Text>
        ),
      )}
    </Box>
  );
}

function TracesScreen({ model, cursor, rows }: { model: SessionModel; cursor: number; rows: number }) {
  const [from, to] = windowAround(cursor, model.traces.length, Math.max(3, rows - 5));
  const selected = model.traces[cursor];
  const started = selected ? breakBefore(model, selected) : undefined;
  return (
    <Box flexDirection="column">
      <Text bold>{`session ${model.session.id} · prefix-merged traces: ${model.traces.length}, breaks: ${model.breaks.length}`}</Text>
      {model.traces.length === 0 ? <Text color="yellow">no trace: no call here has the server's token ids</Text> : null}
      {model.traces.slice(from, to).map((t, i) => {
        const trainable = t.loss_mask.reduce<number>((a, m) => a + m, 0);
        const chain = t.request_ids.map((id) => `#${seqOf(model, id) ?? '?'}`).join(' → ');
        return (
          <Text key={t.trace_index} inverse={from + i === cursor} wrap="truncate-end">
            {`${from + i === cursor ? '›' : ' '} trace ${t.trace_index}  ${pad(t.agent_id, 10)} ${chain}  ${t.prompt_ids.length + t.response_ids.length} tokens, ${trainable} trainable${rewardText(t.reward, t.advantage)}`}
          </Text>
        );
      })}
      {selected ? (
        <Box flexDirection="column" marginTop={1}>
          {started ? (
            <Text color="yellow">{`starts at a ${started.class} break: #${started.seq} could not extend #${seqOf(model, started.previousRequestId) ?? '?'} at token ${started.position}`}</Text>
          ) : (
            <Text color="green">{selected.trace_index === 0 ? "the session's first trace" : "a new chain (another agent's first call)"}</Text>
          )}
          {started?.expected !== undefined ? <Text color="gray">{`  trace had: ${JSON.stringify(started.expected).slice(0, 100)}`}</Text> : null}
          {started?.found !== undefined ? <Text color="gray">{`  call sent: ${JSON.stringify(started.found).slice(0, 100)}`}</Text> : null}
          {Array.isArray(selected.metadata.policy_versions) ? (
            <Text color="gray">{`  policy versions: ${(selected.metadata.policy_versions as string[]).join(', ')}`}</Text>
          ) : null}
        </Box>
      ) : null}
    </Box>
  );
}

function TokensScreen(props: {
  title: string;
  strip: StripToken[];
  lines: StripSegment[][];
  top: number;
  rows: number;
  query: string;
  matches: number[];
  match: number;
}) {
  const { title, strip, lines, top, rows, query, matches, match } = props;
  const sampled = strip.filter((t) => t.kind === 'sampled').length;
  const context = strip.filter((t) => t.kind === 'context').length;
  return (
    <Box flexDirection="column">
      <Text
        bold
      >{`${title} · ${strip.length - sampled - context} prompt, ${sampled} sampled${context ? `, ${context} context (mask 0)` : ''} · lines ${top + 1}-${Math.min(lines.length, top + rows)} of ${lines.length}`}</Text>
      <Text>
        <Text dimColor>prompt </Text>
        {context ? <Text color="blue">context </Text> : null}
        {BAND_LABELS.map((label, band) => (
          <Text key={label} color={BAND_COLOURS[band]}>{`${label} `}</Text>
        ))}
        {query ? <Text color="gray">{`  "${query}": ${matches.length === 0 ? 'not found' : `${match + 1}/${matches.length}`}`}</Text> : null}
      </Text>
      {lines.slice(top, top + rows).map((line, n) => (
        <Text key={top + n} wrap="truncate">
          {line.map((seg, k) => {
            const token = strip[seg.index]!;
            const odd = seg.index % 2 === 1;
            const text = seg.text;
            if (token.kind === 'prompt')
              return (
                <Text key={k} dimColor underline={odd}>
                  {text}
                </Text>
              );
            if (token.kind === 'context')
              return (
                <Text key={k} color="blue" underline={odd}>
                  {text}
                </Text>
              );
            const band = logprobBand(token.logprob);
            return (
              <Text key={k} color={band === null ? 'cyan' : BAND_COLOURS[band]} bold underline={odd}>
                {text}
              </Text>
            );
          })}
        </Text>
      ))}
    </Box>
  );
}

function callRow(c: InspectCall): string {
  const tokens =
    c.promptTokenCount === null
      ? 'no token ids'
      : `${c.promptTokenCount}+${c.sampledTokenCount ?? 0} tok${c.sharedPrefix ? ` (${c.promptTokenCount - c.sharedPrefix} new)` : ''}`;
  const where = c.excluded ? `not trained: ${c.excluded}` : c.trace !== null ? `trace ${c.trace}` : '';
  return `#${pad(String(c.seq), 3)} ${pad(c.provider, 16)} ${pad(c.status, 7)} ${pad(c.streamed ? 'stream' : 'json', 6)} ${pad(tokens, 23)} ${pad(c.finishReason ?? '-', 10)} ${where}${c.error ? `  ${c.error}` : ''}`;
}

function callTitle(c: InspectCall): string {
  return `call #${c.seq} · agent ${c.agentId} · ${c.provider} · ${c.finishReason ?? c.status}`;
}

function traceTitle(model: SessionModel, index: number): string {
  const t = model.traces[index]!;
  return `trace ${index} · agent ${t.agent_id} · ${t.request_ids.length} call${t.request_ids.length === 1 ? '' : 's'}${rewardText(t.reward, t.advantage)}`;
}

function rolloutLine(model: SessionModel): string | null {
  const s = model.sample;
  if (!s) return null;
  const group = model.group ? `  group mean ${model.group.mean?.toFixed(3) ?? '-'} std ${model.group.std?.toFixed(3) ?? '-'}` : '';
  return `rollout ${s.rolloutId} · task ${s.taskId} #${s.sampleIndex} · ${s.status}${rewardText(s.reward, s.advantage)}${s.accepted === null ? '' : s.accepted ? ' · accepted' : ' · rejected'}${group}`;
}

function rewardText(reward: number | null, advantage: number | null): string {
  return `${reward === null ? '' : `  reward ${reward}`}${
    advantage === null
      ? ''
      : `  adv ${advantage
          .toFixed(3)
          .replace(/^-(0\.0+)$/, '$1')
          .replace(/^(?!-)/, '+')}`
  }`;
}

function allCallsByAgent(model: SessionModel): InspectCall[] {
  return model.agents.flatMap((a) => a.calls);
}

function filterSessions(sessions: SessionSummary[], query: string): SessionSummary[] {
  const q = query.toLowerCase();
  return q ? sessions.filter((s) => [s.id, s.status, s.harness ?? '', s.cwd ?? ''].some((f) => f.toLowerCase().includes(q))) : sessions;
}

function filterCalls(calls: InspectCall[], query: string): InspectCall[] {
  const q = query.toLowerCase();
  return q
    ? calls.filter((c) =>
        [`#${c.seq}`, c.id, c.agentId, c.provider, c.status, c.finishReason ?? '', c.excluded ?? '', c.error ?? ''].some((f) => f.toLowerCase().includes(q)),
      )
    : calls;
}

function firstSampledLine(lines: StripSegment[][], strip: readonly StripToken[]): number {
  const i = lines.findIndex((line) => line.some((seg) => strip[seg.index]!.kind !== 'prompt'));
  return i === -1 ? 0 : i;
}

/** The [from, to) slice of `total` rows, `size` long, that keeps `cursor` in view. */
function windowAround(cursor: number, total: number, size: number): [number, number] {
  const from = clamp(cursor - Math.floor(size / 2), 0, Math.max(0, total - size));
  return [from, Math.min(total, from + size)];
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, n));
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** Mounts the browser on the terminal and resolves when the user quits. */
export async function browseSessions(source: BrowserSource, sessionId?: string): Promise<void> {
  const app = render(<SessionBrowser source={source} sessionId={sessionId} />, { exitOnCtrlC: false, patchConsole: false });
  await app.waitUntilExit();
}
