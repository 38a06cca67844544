import cliProgress from 'cli-progress';
import chalk from 'chalk';
import type { CallSummary } from '../proxy/call-record.js';
import type { SessionSummary } from '../store/sessions.js';
import { count } from './plural.js';

/**
 * The live line under a headless `polar run` on a TTY: calls, tokens, errors and elapsed time,
 * updated as each call ends (the proxy's call events), redrawn by cli-progress in place on stderr.
 * There is no total to measure against, so the line has no bar, only counts.
 */
export class RunStatusLine {
  private readonly bar: cliProgress.SingleBar;
  private calls = 0;
  private promptTokens = 0;
  private sampledTokens = 0;
  private errors = 0;
  private stopped = false;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.bar = new cliProgress.SingleBar({
      stream,
      format: chalk.dim('polar: {calls} · {prompt} prompt / {sampled} · {errors} · {duration_formatted}'),
      hideCursor: false,
      clearOnComplete: true,
      fps: 2,
      noTTYOutput: false,
      // Redrawn even when unchanged: a line printed above (printAbove) clears it.
      forceRedraw: true,
    });
    this.bar.start(1, 0, this.payload());
  }

  /** A call of this run ended (from the proxy this run started). */
  call(s: CallSummary): void {
    this.calls++;
    this.promptTokens += s.promptTokens ?? 0;
    this.sampledTokens += s.sampledTokens ?? 0;
    if (s.status !== 'ok') this.errors++;
    this.bar.update(0, this.payload());
  }

  /** The session's totals, read from a running `polar proxy`'s database (runs with --proxy). */
  session(s: SessionSummary): void {
    this.calls = s.requests;
    this.promptTokens = s.promptTokens;
    this.sampledTokens = s.sampledTokens;
    this.errors = s.failed;
    this.bar.update(0, this.payload());
  }

  /**
   * A line for `out` (polar's stdout). On the terminal the status line is on, the status line is
   * cleared, the line printed in its place, and the status line drawn again below it.
   */
  printAbove(line: string, out: NodeJS.WriteStream = process.stdout): void {
    if (!out.isTTY || this.stopped) {
      out.write(`${line}\n`);
      return;
    }
    this.stream.write('\r\x1b[2K');
    out.write(`${line}\n`);
    // The bar restores the cursor position it saved at start when it stops: save the new one.
    this.stream.write('\x1b7');
    this.bar.render();
  }

  stop(): void {
    this.stopped = true;
    this.bar.stop();
  }

  private payload() {
    return {
      calls: count(this.calls, 'call'),
      prompt: this.promptTokens.toLocaleString('en'),
      sampled: `${this.sampledTokens.toLocaleString('en')} sampled ${this.sampledTokens === 1 ? 'token' : 'tokens'}`,
      errors: count(this.errors, 'error'),
    };
  }
}
