import { EventEmitter } from 'node:events';
import { Box, render, Text } from 'ink';
import { useEffect, useState } from 'react';
import type { TrainUpdate } from '../../train/run-train.js';
import { maskedWarning, zeroAdvantageWarning } from '../../train/progress.js';

export interface TrainViewProps {
  title: string;
  runDir: string;
  updates: EventEmitter;
  initial: TrainUpdate;
}

const PHASES = ['setup', 'generation', 'training', 'validation', 'checkpoint', 'done'] as const;

/**
 * The live view of a `polar train` run: phase, step N/M, the last step's loss, mean reward and step
 * time, GPU memory, and the agent's latest harness sessions with their rewards. Fed by `launch`'s
 * updates (NeMo-RL's progress lines, nvidia-smi, the database).
 */
export function TrainView({ title, runDir, updates, initial }: TrainViewProps) {
  const [u, setU] = useState<TrainUpdate>(initial);
  useEffect(() => {
    const on = (next: TrainUpdate) => setU({ ...next, progress: { ...next.progress } });
    updates.on('update', on);
    return () => {
      updates.off('update', on);
    };
  }, [updates]);
  const p = u.progress;
  const last = p.completed[p.completed.length - 1];
  const width = 24;
  const filled = p.maxSteps ? Math.round((Math.min(p.step, p.maxSteps) / p.maxSteps) * width) : 0;
  return (
    <Box flexDirection="column">
      <Text bold>{title}</Text>
      <Box>
        <Text>phase </Text>
        {PHASES.map((phase) => (
          <Text key={phase} color={phase === p.phase ? 'cyan' : 'gray'} bold={phase === p.phase}>
            {`${phase} `}
          </Text>
        ))}
      </Box>
      <Text>
        {`step ${p.step}/${p.maxSteps ?? '?'} `}
        <Text color="cyan">{'█'.repeat(filled)}</Text>
        <Text color="gray">{'░'.repeat(width - filled)}</Text>
        {p.setupSeconds !== null ? `  setup ${p.setupSeconds.toFixed(0)} s` : ''}
      </Text>
      <Text>
        {`loss ${fmt(last?.loss)}   mean reward ${fmt(last?.reward)}   step time ${last?.stepTimeS != null ? `${last.stepTimeS.toFixed(1)} s` : '-'}   GPU ${u.gpuMemoryMiB ? u.gpuMemoryMiB.map((m) => `${(m / 1024).toFixed(1)} GiB`).join(' / ') : '-'}`}
      </Text>
      {last?.advantages ? (
        <Text color={zeroAdvantageWarning(last) ? 'red' : undefined} bold={zeroAdvantageWarning(last) !== null}>
          {`advantages min ${fmt(last.advantages.min)}  max ${fmt(last.advantages.max)}  mean ${fmt(last.advantages.mean)}`}
          {zeroAdvantageWarning(last) ? `   every advantage 0 in step ${last.step}: it did not train (first prompts split, or equal rewards)` : ''}
        </Text>
      ) : null}
      {last?.masked ? (
        <Text color={maskedWarning(last) ? 'red' : undefined} bold={maskedWarning(last) !== null}>
          {`masked ${Math.round(last.masked.share * 100)}% of step ${last.step}'s samples`}
          {maskedWarning(last) ? '   they trained nothing: see "masked" in train.log' : ''}
        </Text>
      ) : null}
      {u.sessions.length > 0 ? (
        <Box flexDirection="column">
          <Text bold>recent sessions</Text>
          {u.sessions.map((s) => (
            <Text key={s.sessionId}>
              {`  ${s.sessionId}  ${s.taskId}  `}
              <Text color={s.reward === null ? 'yellow' : s.reward > 0 ? 'green' : 'red'}>{s.reward === null ? s.status : `reward ${fmt(s.reward)}`}</Text>
            </Text>
          ))}
        </Box>
      ) : null}
      <Text color="gray">{`last: ${p.lastLine.slice(0, 120)}`}</Text>
      <Text color="gray">{`Ctrl-C stops NeMo-RL (again to kill it) · log ${runDir}/train.log · metrics ${runDir}/metrics.jsonl`}</Text>
    </Box>
  );
}

function fmt(n: number | null | undefined): string {
  return n === null || n === undefined ? '-' : Number.isInteger(n) ? String(n) : n.toFixed(4);
}

/** Mounts the view on the terminal; `update` feeds it, `stop` unmounts it. */
export function startTrainView(props: Omit<TrainViewProps, 'updates'>): { update(u: TrainUpdate): void; stop(): void } {
  const updates = new EventEmitter();
  const app = render(<TrainView {...props} updates={updates} />, { stdout: process.stderr, exitOnCtrlC: false, patchConsole: false });
  return {
    update: (u) => updates.emit('update', u),
    stop: () => app.unmount(),
  };
}
