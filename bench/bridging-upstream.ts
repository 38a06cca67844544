/**
 * The benchmark's inference server, in its own process so its template and sampling work is not
 * counted as the proxy's: the mock server with the replay script (reasoning, tool calls, answers).
 * Prints its URL as one JSON line.
 */
import { startMockServer } from '../src/mock-server/server.js';
import { replayScript } from '../test/support/replay.js';

const server = await startMockServer({ script: replayScript, splitEvery: 3, log: false });
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
