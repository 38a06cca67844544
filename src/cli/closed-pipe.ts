import type { Writable } from 'node:stream';

/** A write to a pipe whose reader has gone (`polar … | head`). */
export function isClosedPipe(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'EPIPE';
}

/**
 * `polar sessions | head -1`: once the reader has what it wanted and closes the pipe, the next write
 * fails with EPIPE (Node ignores SIGPIPE, which would have ended a C program quietly). The output is
 * not wanted any more, so polar ends at once with 0 and no message, like `head`'s other writers;
 * any other error on the stream is still an error.
 */
export function exitQuietlyOnClosedPipe(streams: readonly Writable[] = [process.stdout, process.stderr]): void {
  for (const stream of streams) {
    stream.on('error', (err) => {
      if (!isClosedPipe(err)) throw err;
      process.exit(0);
    });
  }
}
