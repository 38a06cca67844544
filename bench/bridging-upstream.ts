/**
 * The benchmark's inference server, in its own process so its template and sampling work is not
 * counted as the proxy's: the mock server with the replay script (reasoning, tool calls, answers),
 * or with `--constant` one fixed short answer for every call, so that every call costs the server
 * the same and latency samples differ only by what sits between client and server.
 * Prints its URL as one JSON line.
 */
import { startMockServer } from '../src/mock-server/server.js';
import { replayScript } from '../test/support/replay.js';

const constant = process.argv.includes('--constant');
// --fast: no template or tokenizer work (replies sized like the request), for c=64 rows.
const fast = process.argv.includes('--fast');
const server = await startMockServer({
  script: constant ? () => ({ content: 'Done: the files are listed and the change is made — café, 日本語, 🚀.' }) : replayScript,
  splitEvery: 3,
  log: false,
  keepAliveTimeoutMs: 0,
  fast,
});
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
