import cliProgress from 'cli-progress';
import chalk from 'chalk';
import type { RolloutEvent } from '../rollout/config.js';

const STAGES = ['queued', 'init', 'ready', 'running', 'post', 'done'] as const;
type Stage = (typeof STAGES)[number];

/**
 * A rollout's live view on a TTY: one cli-progress bar per stage (how many samples are queued, in
 * INIT, waiting READY, RUNNING, in POSTRUN, done, out of all), and on the done bar the mean reward
 * so far, sessions per minute and the ETA. Fed by the rollout's stage events.
 */
export class RolloutProgress {
  private readonly multi: cliProgress.MultiBar;
  private readonly bars = new Map<Stage, cliProgress.SingleBar>();
  private readonly where = new Map<string, Stage>();
  private readonly counts: Record<Stage, number>;
  private rewards: number[] = [];
  private readonly started = Date.now();
  private finishedHere = 0;

  constructor(
    private readonly total: number,
    alreadyDone: number,
    stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.counts = { queued: total - alreadyDone, init: 0, ready: 0, running: 0, post: 0, done: alreadyDone };
    this.multi = new cliProgress.MultiBar(
      {
        stream,
        format: `{stage} ${chalk.cyan('{bar}')} {value}/{total}{extra}`,
        barsize: 24,
        hideCursor: false,
        clearOnComplete: false,
        fps: 4,
        noTTYOutput: false,
      },
      cliProgress.Presets.shades_grey,
    );
    for (const stage of STAGES) this.bars.set(stage, this.multi.create(total, this.counts[stage], { stage: stage.padEnd(7), extra: '' }));
  }

  event(e: RolloutEvent): void {
    const from = this.where.get(e.sampleId) ?? 'queued';
    const to: Stage = e.type === 'done' ? (e.outcome === 'interrupted' ? 'queued' : 'done') : e.stage;
    if (from === to) return;
    this.counts[from]--;
    this.counts[to]++;
    this.where.set(e.sampleId, to);
    if (e.type === 'done' && to === 'done') {
      this.finishedHere++;
      if (e.reward !== null) this.rewards.push(e.reward);
    }
    this.redraw();
  }

  stop(): void {
    this.redraw();
    this.multi.stop();
  }

  private redraw(): void {
    for (const stage of STAGES) this.bars.get(stage)!.update(this.counts[stage], { stage: stage.padEnd(7), extra: stage === 'done' ? this.doneExtra() : '' });
  }

  private doneExtra(): string {
    const minutes = (Date.now() - this.started) / 60_000;
    const rate = minutes > 0 ? this.finishedHere / minutes : 0;
    const mean = this.rewards.length > 0 ? (this.rewards.reduce((a, b) => a + b, 0) / this.rewards.length).toFixed(3) : '-';
    const left = this.total - this.counts.done;
    const eta = rate > 0 ? `${Math.ceil(left / rate)} min` : '-';
    return `  mean reward ${mean} · ${rate.toFixed(1)} sessions/min · ETA ${eta}`;
  }
}
