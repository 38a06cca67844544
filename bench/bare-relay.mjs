// The benchmark's floor: a pass-through proxy that moves bytes and nothing else (no parsing, no
// recording), built from the same parts as polar's proxy (node:http in, an undici Pool out).
// Its added latency is what any extra hop costs on the machine; polar's minus it is polar's work.
import http from 'node:http';
import { Pool } from 'undici';

const pool = new Pool(process.argv[2], { connections: 128 });
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const up = await pool.request({ method: 'POST', path: req.url, body: Buffer.concat(chunks), headers: { 'content-type': 'application/json' } });
  res.writeHead(up.statusCode, { 'content-type': up.headers['content-type'] });
  for await (const c of up.body) res.write(c);
  res.end();
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })));
process.on('SIGTERM', () => process.exit(0));
