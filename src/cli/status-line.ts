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

  constructor(stream: NodeJS.WriteStream = process.stderr) {
    this.bar = new cliProgress.SingleBar({
      stream,
      format: chalk.dim('polar: {calls} · {prompt} prompt / {sampled} · {errors} · {duration_formatted}'),
      hideCursor: false,
      clearOnComplete: true,
      fps: 2,
      noTTYOutput: false,
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

  stop(): void {
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
